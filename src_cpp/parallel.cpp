#include "parallel.hpp"

#include <cstdlib>
#include <cstring>

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

bool team_wait_yields() {
    static const bool yields = [] {
        const char* v = std::getenv("STEIN_CORESET_TEAM_WAIT");
        return v != nullptr && std::strcmp(v, "yield") == 0;
    }();
    return yields;
}

double team_grain() {
    static const double grain = [] {
        const char* v = std::getenv("STEIN_CORESET_TEAM_GRAIN");
        if (v == nullptr || *v == '\0') return 1.0;
        char* end = nullptr;
        const double g = std::strtod(v, &end);
        return (end != v && g >= 0.0) ? g : 1.0;
    }();
    return grain;
}

}  // namespace sc
