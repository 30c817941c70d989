/* Hand-written fused C loops: the "hand-written C" column of scripts/bench.py. What a person writes for
 * speed without intrinsics: one loop per workload, compiled with gcc -O3 -march=native -ffast-math
 * (so expf vectorizes through glibc's libmvec) and OpenMP for the thread count of the run. */
#include <math.h>
#include <omp.h>

void ref_set_threads(int n) { omp_set_num_threads(n); }

/* out = relu(a*b + c)*2 + exp(-a) */
void ref_elementwise(float* restrict out, const float* restrict a, const float* restrict b, const float* restrict c, long n) {
#pragma omp parallel for simd schedule(static)
  for (long i = 0; i < n; i++) {
    float t = a[i] * b[i] + c[i];
    out[i] = (t > 0.0f ? t : 0.0f) * 2.0f + expf(-a[i]);
  }
}

/* row softmax of x (rows, cols) */
void ref_softmax(float* restrict out, const float* restrict x, long rows, long cols) {
#pragma omp parallel for schedule(static)
  for (long r = 0; r < rows; r++) {
    const float* xr = x + r * cols;
    float* o = out + r * cols;
    float m = -INFINITY;
    for (long j = 0; j < cols; j++) m = xr[j] > m ? xr[j] : m;
    float s = 0.0f;
    for (long j = 0; j < cols; j++) {
      o[j] = expf(xr[j] - m);
      s += o[j];
    }
    float inv = 1.0f / s;
    for (long j = 0; j < cols; j++) o[j] *= inv;
  }
}

float ref_sum(const float* restrict x, long n) {
  float s = 0.0f;
#pragma omp parallel for simd reduction(+ : s) schedule(static)
  for (long i = 0; i < n; i++) s += x[i];
  return s;
}
