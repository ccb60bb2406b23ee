#include "parallel.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace sc {

int omp_max_threads() {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 0;
#endif
}

}  // namespace sc
