/* A CPU-bound program for cfi2sframe trace: main -> level1 -> work_alloca
   (alloca and an over-aligned local, built -mstackrealign: DRAP) -> the
   -fomit-frame-pointer library through PLT stubs; a profiling timer's
   handler spins in the library too, so samples catch it mid-flight; the
   loop also reads the clock through the vDSO.
   Runs for argv[1] seconds (default 2) with argv[2] more threads doing
   the same (default 0). */
#include <alloca.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

extern long lib_mid(long);
extern long lib_leaf(long);
extern long lib_tiny(long);
extern volatile long sink;

static volatile sig_atomic_t done;

static void handler(int sig)
{
	sink += lib_leaf(20000 + sig);
}

static void on_alarm(int sig)
{
	(void)sig;
	done = 1;
}

__attribute__((noinline)) long work_alloca(long n)
{
	char *p = alloca(n);
	double v[4] __attribute__((aligned(32))) = {1, 2, 3, 4};
	memset(p, 1, n);
	long r = 0;
	while (!done) {
		r += lib_mid(p[n - 1] + 5000);
		for (int i = 0; i < 20000; i++)
			r = lib_tiny(r);
		/* Into the vDSO, which no file holds. */
		struct timespec ts;
		for (int i = 0; i < 300; i++)
			clock_gettime(CLOCK_MONOTONIC, &ts);
		r += ts.tv_nsec & 1;
		/* Work in this function's own frame (the alloca'd buffer), so
		   samples land in it whatever the PLT stubs cost. */
		for (int i = 0; i < 20000; i++)
			r += p[(r + i) & (n - 1)] ^ (r >> 7);
		v[r & 3] += 1;
	}
	return r + p[0] + (long)v[0];
}

__attribute__((noinline)) long level1(long n)
{
	return work_alloca(n + 16) + 1;
}

static void *thread_main(void *arg)
{
	sink += level1((long)arg);
	return 0;
}

int main(int argc, char **argv)
{
	int secs = argc > 1 ? atoi(argv[1]) : 2;
	int nthreads = argc > 2 ? atoi(argv[2]) : 0;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = handler;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGPROF, &sa, 0);
	sa.sa_handler = on_alarm;
	sigaction(SIGALRM, &sa, 0);
	struct itimerval it = {{0, 2000}, {0, 2000}};
	setitimer(ITIMER_PROF, &it, 0);
	alarm(secs);
	pthread_t t[16];
	if (nthreads > 16)
		nthreads = 16;
	for (int i = 0; i < nthreads; i++)
		pthread_create(&t[i], 0, thread_main, (void *)(long)(i + 8));
	sink = level1(argc * 10);
	for (int i = 0; i < nthreads; i++)
		pthread_join(t[i], 0);
	return 0;
}
