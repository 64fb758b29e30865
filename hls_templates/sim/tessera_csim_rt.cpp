// Tessera's C-simulation runtime, linked into every project's C-simulation library and
// testbench (tessera.compiler.sim.build).
//
// - tessera_weights_dir(): where hls4ml's load_weights_from_txt reads the weights: the
//   folder "weights" beside the library (firmware/<project>-*.so) or "firmware/weights"
//   beside the testbench executable.  Found at run time, so that compiled objects hold no
//   path and are shared by every project with the same sources.
// - tessera_csim_batch(): runs the bridge's <project>_double on n samples in one call
//   (no per-sample call from Python), counting finished samples in shared memory, so that
//   the caller shows progress and attributes a crash to its sample.
#include <dlfcn.h>
#include <string>
#include <sys/stat.h>

__attribute__((visibility("hidden"))) const char *tessera_weights_dir();

static bool tessera_is_dir(const std::string &p) {
    struct stat st;
    return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

__attribute__((visibility("hidden"))) const char *tessera_weights_dir() {
    static std::string dir;
    if (dir.empty()) {
        std::string base = ".";
        Dl_info info;
        if (dladdr((void *)&tessera_weights_dir, &info) && info.dli_fname && info.dli_fname[0]) {
            std::string file = info.dli_fname;
            std::string::size_type slash = file.rfind('/');
            base = slash == std::string::npos ? std::string(".") : file.substr(0, slash);
        }
        const std::string candidates[2] = {base + "/weights", base + "/firmware/weights"};
        for (const std::string &c : candidates) {
            if (tessera_is_dir(c)) {
                dir = c;
                break;
            }
        }
        if (dir.empty())
            dir = "firmware/weights";
    }
    return dir.c_str();
}

typedef void (*tessera_kernel_fn)(double *, double *);

// Runs fn on samples [0, n) of x (n x n_in doubles) into y (n x n_out doubles), storing the
// number of finished samples in *done after each (shared memory the caller reads for its
// progress and, after a crash, for the sample that crashed); returns n.
extern "C" long tessera_csim_batch(tessera_kernel_fn fn, double *x, double *y, long n, long n_in, long n_out,
                                   long *done) {
    for (long i = 0; i < n; i++) {
        fn(x + i * n_in, y + i * n_out);
        __atomic_store_n(done, i + 1, __ATOMIC_RELEASE);
    }
    return n;
}
