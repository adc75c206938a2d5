/* Shared library for the end-to-end test: called through the PLT, calls
   back into the program and into libc through its own PLT. */
#include <stdlib.h>
#include <string.h>

int lib_apply(int (*fn)(int), int x) { return fn(x) + (int)strlen("abc"); }

int lib_sum(int n) {
	int *v = malloc(sizeof *v * (size_t)n), s = 0;
	for (int i = 0; i < n; i++)
		v[i] = i * i;
	for (int i = 0; i < n; i++)
		s += v[i];
	free(v);
	return s;
}
