/* main -> level1 -> with_alloca (alloca) -> lib_mid@plt -> lib_mid ->
   lib_leaf@plt -> lib_leaf; then level1 raises SIGUSR1 and the handler
   calls lib_mid again. */
#include <alloca.h>
#include <signal.h>
#include <string.h>

extern long lib_mid(long);
extern volatile long sink;

__attribute__((noinline)) long with_alloca(long n)
{
	char *p = alloca(n);
	memset(p, 1, n);
	long r = lib_mid(p[n - 1] + n);
	return r + p[0];
}

static void handler(int sig)
{
	sink += lib_mid(sig);
}

__attribute__((noinline)) long level1(long n)
{
	long r = with_alloca(n + 16);
	raise(SIGUSR1);
	return r + 1;
}

int main(int argc, char **argv)
{
	(void)argv;
	signal(SIGUSR1, handler);
	sink = level1(argc * 10);
	return 0;
}
