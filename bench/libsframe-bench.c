/* Times libsframe on a raw .sframe section the way sframe/bench_test.go
   times package sframe: sframe_decode as the mean of 50 decodes, best of 5
   rounds; sframe_find_fre over the PCs in PCSFILE (section-relative
   uint64s, written by the Go benchmark) as the sum, over blocks of 10,000
   PCs, of each block's best time in 5 passes over all the PCs; all in CPU
   time of the thread (so that other processes on a shared machine count
   as little as possible).
   Usage: libsframe-bench SECTION PCSFILE
   Prints: decode_ns N / lookup_ns N (per lookup) / misses N */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sframe-api.h>

static char *slurp(const char *name, size_t *len)
{
	FILE *f = fopen(name, "rb");
	if (!f) { perror(name); exit(1); }
	fseek(f, 0, SEEK_END);
	*len = (size_t)ftell(f);
	fseek(f, 0, SEEK_SET);
	char *b = malloc(*len ? *len : 1);
	if (!b || fread(b, 1, *len, f) != *len) { perror(name); exit(1); }
	fclose(f);
	return b;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	if (argc != 3) { fprintf(stderr, "usage: %s SECTION PCSFILE\n", argv[0]); return 2; }
	size_t slen, plen;
	char *sec = slurp(argv[1], &slen);
	uint64_t *pcs = (uint64_t *)slurp(argv[2], &plen);
	size_t n = plen / 8;
	double best = 1e30;
	int err = 0;
	/* Mean of 50 decodes (the free is timed too, as Go's garbage
	   collection is on the Go side), best of 5 rounds. */
	for (int r = 0; r < 5; r++) {
		double t0 = now();
		for (int k = 0; k < 50; k++) {
			sframe_decoder_ctx *d = sframe_decode(sec, slen, &err);
			if (!d) { fprintf(stderr, "sframe_decode: error %d\n", err); return 1; }
			sframe_decoder_free(&d);
		}
		double t1 = now();
		if ((t1 - t0) / 50 < best) best = (t1 - t0) / 50;
	}
	printf("decode_ns %.0f\n", best);
	sframe_decoder_ctx *d = sframe_decode(sec, slen, &err);
	sframe_frame_row_entry fre;
	enum { passes = 5, block = 10000 };
	size_t nblk = (n + block - 1) / block;
	double *bbest = malloc((nblk ? nblk : 1) * sizeof *bbest);
	if (!bbest) { perror("malloc"); return 1; }
	for (size_t k = 0; k < nblk; k++)
		bbest[k] = 1e30;
	long miss = 0;
	for (int r = 0; r < passes; r++) {
		miss = 0;
		for (size_t k = 0; k < nblk; k++) {
			size_t end = (k + 1) * block < n ? (k + 1) * block : n;
			double t0 = now();
			for (size_t i = k * block; i < end; i++)
				if (sframe_find_fre(d, (int64_t)pcs[i], &fre) != 0)
					miss++;
			double t1 = now();
			if (t1 - t0 < bbest[k]) bbest[k] = t1 - t0;
		}
	}
	best = 0;
	for (size_t k = 0; k < nblk; k++)
		best += bbest[k];
	free(bbest);
	printf("lookup_ns %.2f\nmisses %ld\n", best / n, miss);
	sframe_decoder_free(&d);
	return 0;
}
