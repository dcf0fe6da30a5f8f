/* Block Walsh-Hadamard rotation (the int8 mode's, model/smooth.h): each row
 * of length k is cut into blocks of b values (b a power of two dividing k)
 * and every block multiplied by the b x b Hadamard matrix of +-1 entries
 * (Sylvester order, unnormalized: H H^T = b I), by the fast transform.
 * Rotating a product's input and the rows of its weights alike, x H times
 * (W H / b)^T = x W^T, leaves the product unchanged in exact arithmetic
 * while spreading an outlier of x (or a heavy-tailed row) over its block,
 * which is what a per-token int8 scale needs. */
#ifndef BS_HADAMARD_H
#define BS_HADAMARD_H

enum { BS_HADAMARD_MAX_BLOCK = 256 };

/* The block for rows of length k: the largest power of two dividing k, at
 * most BS_HADAMARD_MAX_BLOCK; 0 when under 8 (no rotation). */
int bs_hadamard_block(int k);
/* x (rows x k, row stride ld) rotated in place, block size b: the fastest
 * kernel of this CPU (all give the same bits). */
void bs_hadamard_rows(float *x, int rows, int ld, int k, int b);
/* For tests: the portable (vector 0) or the AVX-512 code (1, when the CPU
 * has it). */
void bs_hadamard_rows_kernel(float *x, int rows, int ld, int k, int b, int vector);

#endif
