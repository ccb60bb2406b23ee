"""KT-Compress++ (Alg. F.3): near-linear-time kernel thinning targeting P (in progress)."""
