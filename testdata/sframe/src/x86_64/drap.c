/* A function that realigns its stack through a DRAP register (%r10): GCC
 * describes the CFA with DW_CFA_def_cfa_expression (deref of %rbp-8), which
 * SFrame V3 can only encode as a flexible FDE. */

extern void use(void *, int);

__attribute__((force_align_arg_pointer))
int drap(int a, int b, int c, int d, int e, int f, int g, int n)
{
	int v[n] __attribute__((aligned(64)));
	use(v, g + a + b + c + d + e + f);
	return v[0];
}
