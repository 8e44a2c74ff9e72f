/* dplab._philox_normal: float32 standard normals from Philox4x32-10, vectorized, for the CPU.
 *
 * The stream is defined in dplab/philox.py (philox_normal_reference computes the same bits with
 * torch operations; tests/test_philox.py checks that they agree bit for bit).  In short: the
 * numbers come in chunks of 256 from 64 consecutive Philox blocks (counter c + i, key k0, k1);
 * block i gives words x0..x3 and the chunk's numbers i, 64 + i, 128 + i, 192 + i are
 * r(x0, x1) cos θ(x1), r(x0, x1) sin θ(x1), r(x2, x3) cos θ(x3), r(x2, x3) sin θ(x3)
 * (Box-Muller), with r(a, b) = sqrt(-2 ln u), u = ((a >> 8) + 1) 2^-24 or, where a >> 8 = 0,
 * (j + 1) 2^-40 with j = (a & 255) 256 + (b & 255) (so |z| <= 7.45), and
 * θ(b) = 2π (b >> 8) 2^-24 (Box & Muller 1958).
 * ln, sin and cos are the single-precision polynomials of S. L. Moshier's Cephes Math Library
 * (logf, sinf, cosf), written without branches so that the compiler
 * vectorizes them; every float operation is one IEEE-754 single operation (no fused
 * multiply-add: build with -ffp-contract=off), so every instruction set gives the same bits.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define M0 0xD2511F53u
#define M1 0xCD9E8D57u
#define W0 0x9E3779B9u
#define W1 0xBB67AE85u
#define LANES 64

/* one copy per instruction set, chosen at load time (-DDPLAB_NO_CLONES: the compiler's target
 * only; tests/test_philox.py builds it so to check that the bits do not depend on it) */
#if defined(__GNUC__) && __GNUC__ >= 11 && !defined(__clang__) && defined(__x86_64__) && \
    defined(__linux__) && !defined(DPLAB_NO_CLONES)
#define CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define CLONES
#endif

static inline float as_float(uint32_t b) { float f; memcpy(&f, &b, 4); return f; }
static inline uint32_t as_bits(float f) { uint32_t b; memcpy(&b, &f, 4); return b; }

/* ln x for x in (0, 1] (Cephes logf): x = m 2^e with m in [sqrt(1/2), sqrt(2)) */
static inline float ln(float x) {
    uint32_t b = as_bits(x);
    int32_t e = (int32_t)((b >> 23) & 0xffu) - 126;
    float m = as_float((b & 0x007fffffu) | 0x3f000000u); /* [1/2, 1) */
    int32_t small = m < 0.70710678f;
    e -= small;
    m = m * (float)(1 + small);
    float f = m - 1.0f, z = f * f, fe = (float)e;
    float y = 7.0376836292e-2f;
    y = y * f + -1.1514610310e-1f;
    y = y * f + 1.1676998740e-1f;
    y = y * f + -1.2420140846e-1f;
    y = y * f + 1.4249322787e-1f;
    y = y * f + -1.6668057665e-1f;
    y = y * f + 2.0000714765e-1f;
    y = y * f + -2.4999993993e-1f;
    y = y * f + 3.3333331174e-1f;
    y = y * f * z;
    y = y + -2.12194440e-4f * fe;
    y = y + -0.5f * z;
    return (f + y) + 0.693359375f * fe;
}

/* r cos θ and r sin θ of one Box-Muller pair from two Philox words */
static inline void pair(uint32_t a, uint32_t b, float *restrict cos_out, float *restrict sin_out) {
    /* u = ((a >> 8) + 1) 2^-24, exact; its smallest bucket, a >> 8 = 0, spread over
     * (j + 1) 2^-40 by the 16 bits j the pair leaves unused (a's and b's low bytes) */
    int32_t k = (int32_t)(a >> 8), j = (int32_t)(((a & 0xffu) << 8) | (b & 0xffu));
    float coarse = ((float)k + 1.0f) * 5.9604644775390625e-8f;
    float fine = ((float)j + 1.0f) * 9.094947017729282379150390625e-13f;
    uint32_t smallest = 0u - (uint32_t)(k == 0);
    float u = as_float((as_bits(fine) & smallest) | (as_bits(coarse) & ~smallest)); /* exact, in [2^-40, 1] */
    float r = __builtin_sqrtf(-2.0f * ln(u));
    float t = (float)(b >> 8) * 5.9604644775390625e-8f * 4.0f; /* θ / (π/2), in [0, 4) */
    int32_t q = (int32_t)(t + 0.5f);
    float x = (t - (float)q) * 1.5707963267948966f; /* [-π/4, π/4] */
    float x2 = x * x;
    float s = ((-1.9515295891e-4f * x2 + 8.3321608736e-3f) * x2 + -1.6666654611e-1f) * x2 * x + x;
    float c = ((2.443315711809948e-5f * x2 + -1.388731625493765e-3f) * x2 + 4.166664568298827e-2f)
                  * x2 * x2 + -0.5f * x2 + 1.0f;
    uint32_t swap = 0u - (uint32_t)(q & 1), sb = as_bits(s), cb = as_bits(c);
    uint32_t sin_b = ((sb & ~swap) | (cb & swap)) ^ ((uint32_t)(q & 2) << 30);
    uint32_t cos_b = ((cb & ~swap) | (sb & swap)) ^ ((uint32_t)((q + 1) & 2) << 30);
    *cos_out = r * as_float(cos_b);
    *sin_out = r * as_float(sin_b);
}

/* always inlined, so that each clone of fill compiles it for its own instruction set */
static inline __attribute__((always_inline)) void chunk(float *restrict out, uint64_t counter, uint32_t k0, uint32_t k1) {
    uint32_t c0[LANES], c1[LANES], c2[LANES], c3[LANES];
    for (int i = 0; i < LANES; i++) {
        uint64_t c = counter + (uint64_t)i;
        c0[i] = (uint32_t)c, c1[i] = (uint32_t)(c >> 32), c2[i] = 0, c3[i] = 0;
    }
    for (int round = 0; round < 10; round++) {
        for (int i = 0; i < LANES; i++) {
            uint64_t p0 = (uint64_t)M0 * c0[i], p1 = (uint64_t)M1 * c2[i];
            uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1[i] ^ k0;
            uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3[i] ^ k1;
            c1[i] = (uint32_t)p1, c3[i] = (uint32_t)p0, c0[i] = n0, c2[i] = n2;
        }
        k0 += W0, k1 += W1;
    }
    for (int i = 0; i < LANES; i++) pair(c0[i], c1[i], out + i, out + LANES + i);
    for (int i = 0; i < LANES; i++) pair(c2[i], c3[i], out + 2 * LANES + i, out + 3 * LANES + i);
}

CLONES static void fill(float *out, int64_t n, uint32_t k0, uint32_t k1, uint64_t counter) {
    int64_t whole = n / (4 * LANES);
    for (int64_t j = 0; j < whole; j++)
        chunk(out + 4 * LANES * j, counter + (uint64_t)(LANES * j), k0, k1);
    if (n > 4 * LANES * whole) {
        float rest[4 * LANES];
        chunk(rest, counter + (uint64_t)(LANES * whole), k0, k1);
        memcpy(out + 4 * LANES * whole, rest, (size_t)(n - 4 * LANES * whole) * sizeof(float));
    }
}

/* fill(address, n, key0, key1, counter): n float32 numbers at the address of a contiguous buffer */
static PyObject *py_fill(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "fill(address, n, key0, key1, counter)");
        return NULL;
    }
    void *address = PyLong_AsVoidPtr(args[0]);
    long long n = PyLong_AsLongLong(args[1]);
    unsigned long k0 = PyLong_AsUnsignedLong(args[2]), k1 = PyLong_AsUnsignedLong(args[3]);
    unsigned long long counter = PyLong_AsUnsignedLongLong(args[4]);
    if (PyErr_Occurred()) return NULL;
    if (n < 0 || k0 > 0xffffffffUL || k1 > 0xffffffffUL) {
        PyErr_SetString(PyExc_ValueError, "n >= 0 and keys < 2**32");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    fill((float *)address, (int64_t)n, (uint32_t)k0, (uint32_t)k1, (uint64_t)counter);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"fill", (PyCFunction)(void (*)(void))py_fill, METH_FASTCALL, "float32 normals (dplab.philox)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_philox_normal", NULL, -1, methods};

PyMODINIT_FUNC PyInit__philox_normal(void) { return PyModule_Create(&module); }
