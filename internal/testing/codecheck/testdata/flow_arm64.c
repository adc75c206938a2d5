/* Functions of the shapes the code analysis meets on AArch64, for
   TestARM64AgainstGCC: frames of all sizes, alloca, switches (jump
   tables), calls that do not return, tail calls, recursion, varargs.
   Linked against the C library (its PLT stubs: abort, exit). */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
extern int ext(int);
__attribute__((noinline)) int leaf(int a, int b) { return a * b + 3; }
__attribute__((noinline)) int big(int n) {
	volatile char buf[70000];
	buf[n] = 1;
	return buf[n / 2] + ext(n);
}
__attribute__((noinline)) int vla(int n) {
	char *p = __builtin_alloca(n);
	memset(p, 1, n);
	return ext(p[n / 2]);
}
__attribute__((noinline)) int sw(int x) {
	switch (x) {
	case 0: return ext(1);
	case 1: return ext(7) + 2;
	case 2: return ext(3) + 1;
	case 3: return ext(9) * 2;
	case 4: return ext(11);
	case 5: return ext(x + 3) - 1;
	case 6: return ext(13) - 4;
	case 8: return ext(x) + ext(x);
	case 9: return ext(99) ^ 3;
	case 10: return ext(1) * 7;
	case 7: return 5;
	}
	return 0;
}
__attribute__((noinline)) int sw2(unsigned x, int y) {
	switch (x) {
	case 0: y += ext(2); break;
	case 1: y -= ext(3); break;
	case 2: y *= ext(4); break;
	case 3: y ^= ext(5); break;
	case 4: y |= ext(6); break;
	case 5: y &= ext(7); break;
	case 6: y += 9; break;
	case 7: y = ext(y); break;
	case 8: y = ext(y + 1); break;
	case 9: return 0;
	default: abort();
	}
	return y + 1;
}
__attribute__((noinline)) int fact(int n) { return n <= 1 ? 1 : n * fact(n - 1); }
__attribute__((noinline)) int sum(int n, ...) {
	va_list ap;
	int s = 0;
	va_start(ap, n);
	for (int i = 0; i < n; i++) s += va_arg(ap, int);
	va_end(ap);
	return s;
}
__attribute__((noinline)) int tail(int n) { return ext(n + 1); }
__attribute__((noinline)) int check(int n) {
	if (n < 0) abort();
	if (n > 100) exit(2);
	return ext(n) + leaf(n, n);
}
__attribute__((noinline)) int loop(int *v, int n) {
	int s = 0;
	for (int i = 0; i < n; i++) s += ext(v[i]) ? leaf(v[i], i) : 0;
	return s;
}
__attribute__((noipa)) int ext(int x) { return x + 1; }
int main(int argc, char **argv) {
	int v[4] = {argc, 2, 3, 4};
	return big(argc) + vla(argc + 8) + sw(argc) + sw2(argc, 3) + fact(argc) +
	       sum(3, 1, 2, argc) + tail(argc) + check(argc) + loop(v, 4);
}
