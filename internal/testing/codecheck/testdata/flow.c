/* Functions of the shapes the code analysis meets, for TestAgainstCFI:
   a switch with a jump table, alloca and a VLA, calls that do not
   return, tail calls, recursion. Linked with stubs.s, no C library. */
#include <stddef.h>

void abort(void) __attribute__((noreturn));
void *memset(void *, int, size_t);
int sink(int);
int sinkp(void *);

__attribute__((noreturn, noinline)) void die(int code) {
	sink(code);
	abort();
}

__attribute__((noinline)) int table(int x, int y) {
	switch (x) {
	case 0: return sink(y) + 1;
	case 1: return y * 3;
	case 2: return sink(y - 1) * 7;
	case 3: return y ^ 5;
	case 4: return sink(y) + sink(y + 1);
	case 5: return 11;
	case 6: return y << 2;
	case 7: return sink(y * y);
	case 8: return y - 9;
	default: return -1;
	}
}

__attribute__((noinline)) int vla(int n) {
	char buf[n];
	memset(buf, 1, n);
	return sinkp(buf) + buf[n / 2];
}

__attribute__((noinline)) int useAlloca(int n) {
	char *p = __builtin_alloca(n);
	memset(p, 2, n);
	return sinkp(p);
}

__attribute__((noinline)) int checked(int x) {
	if (__builtin_expect(x < 0, 0))
		die(x);
	if (x > 1000)
		die(x + 1);
	return sink(x) + x;
}

__attribute__((noinline)) int fib(int n) {
	if (n < 2)
		return n;
	return fib(n - 1) + fib(n - 2);
}

__attribute__((noinline)) int tail(int x) {
	if (x & 1)
		return sink(x * 3);
	return table(x & 7, x);
}

__attribute__((noinline)) long many(long a, long b, long c, long d, long e, long f, long g, long h) {
	long v[16];
	for (int i = 0; i < 16; i++)
		v[i] = sink(a + i) * b;
	return sinkp(v) + c * d + e * f + g * h;
}

int main(void) {
	int s = 0;
	for (int i = 0; i < 12; i++)
		s += table(i, s) + tail(i) + checked(i) + fib(i);
	s += vla(s & 63) + useAlloca(s & 31 | 1) + many(1, 2, 3, 4, 5, 6, 7, 8);
	return s;
}
