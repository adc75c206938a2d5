/* Functions reached only through an address taken without a relocation
   in a non-PIE (mov $fn, data words) or with a RIP-relative lea / adrp+add
   in a PIE; beside them, the addresses that are not functions: a jump
   table's case blocks and a computed goto's labels. */
#include <stdlib.h>

__attribute__((noinline)) static void bye(void) { exit(0); }
__attribute__((noinline)) static int cmp_int(const void *a, const void *b) {
	return *(const int *)a - *(const int *)b;
}
__attribute__((noinline)) static int t_one(int x) { return x + 11; }
__attribute__((noinline)) static int t_two(int x) { return x * 13; }
int (*slots[])(int) = {t_one, t_two};

__attribute__((noinline)) static int sw(int k, int x) {
	switch (k) {
	case 0: return x + 3;
	case 1: return x ^ 77;
	case 2: return x * 5 + 1;
	case 3: return x - 9;
	case 4: return x << 3;
	case 5: return x / 7;
	case 6: return x % 11;
	case 7: return ~x;
	}
	return 0;
}

__attribute__((noinline)) static int interp(const unsigned char *pc, int acc) {
	static void *labels[] = {&&op_inc, &&op_dbl, &&op_end};
	goto *labels[*pc++];
op_inc:
	acc++;
	goto *labels[*pc++];
op_dbl:
	acc *= 2;
	goto *labels[*pc++];
op_end:
	return acc;
}

int main(int argc, char **argv) {
	int v[3] = {3, 1, 2};
	static const unsigned char prog[] = {0, 1, 0, 2};
	atexit(bye);
	qsort(v, 3, sizeof v[0], cmp_int);
	return sw(argc, v[0]) + slots[argc & 1](argc) + interp(prog, argc) + (argv == 0);
}
