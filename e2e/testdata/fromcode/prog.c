#include <stdio.h>
#include <stdlib.h>
#include <time.h>

long lib_work(long n);

/* Runs lib_work for argv[1] seconds. */
int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 1;
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	long s = 0;
	do {
		s += lib_work(200);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 < secs);
	printf("%ld\n", s & 0xff);
	return 0;
}
