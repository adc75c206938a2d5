// main: the test program of scripts/glibc-acceptance.sh, with fp.c, nofp.c
// and lib.c (libdeep.so). It calls
//   main -> fp_level x4 (-fno-omit-frame-pointer)
//        -> nofp_level x4 (-fomit-frame-pointer) -> alloca_level (alloca)
//        -> lib_level x3 in libdeep.so -> prog_callback -> qsort in libc
//        -> compare -> leaf
// and leaf either takes the trace ("chain") or faults, the SIGSEGV handler
// taking it ("signal"). The trace is taken by one call site through a
// function pointer: glibc's backtrace() ("sframe" runs; the harness puts
// libgcc_s.so.1 out of the loader's reach, so a failed SFrame walk returns
// 0 frames), or a copy of backtrace()'s DWARF fallback over libgcc_s's
// _Unwind_Backtrace, loaded by absolute path ("dwarf" runs, the reference).
// Each frame prints as module+offset and symbol, so runs of the same binary
// compare exactly (internal/testing/judge compares them).
//
//   prog sframe|dwarf chain|signal SIZE [LIBGCC_S]
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <unwind.h>

int fp_level(int n);
int lib_level(int n, int (*cb)(void));

static int (*trace_fn)(void **, int);
static int trace_size;
static int fault;
static const char *libgcc_path;

/* The DWARF reference: what glibc's backtrace() returns when it falls back
   to libgcc_s (debug/backtrace.c): the first callback is this function's
   own frame and is skipped; a NULL last address is dropped. */
struct dwarf_arg {
	void **a;
	int cnt, size;
	_Unwind_Word cfa;
	_Unwind_Ptr (*get_ip)(struct _Unwind_Context *);
	_Unwind_Word (*get_cfa)(struct _Unwind_Context *);
};

static _Unwind_Reason_Code dwarf_helper(struct _Unwind_Context *ctx, void *p)
{
	struct dwarf_arg *arg = p;
	if (arg->cnt != -1) {
		arg->a[arg->cnt] = (void *)arg->get_ip(ctx);
		_Unwind_Word cfa = arg->get_cfa(ctx);
		if (arg->cnt > 0 && arg->a[arg->cnt - 1] == arg->a[arg->cnt] && cfa == arg->cfa)
			return _URC_END_OF_STACK;
		arg->cfa = cfa;
	}
	if (++arg->cnt == arg->size)
		return _URC_END_OF_STACK;
	return _URC_NO_REASON;
}

static __attribute__((noinline)) int dwarf_backtrace(void **a, int size)
{
	void *h = dlopen(libgcc_path, RTLD_NOW);
	if (h == NULL) {
		fprintf(stderr, "dlopen %s: %s\n", libgcc_path, dlerror());
		exit(3);
	}
	_Unwind_Reason_Code (*bt)(_Unwind_Trace_Fn, void *) = dlsym(h, "_Unwind_Backtrace");
	struct dwarf_arg arg = {a, -1, size, 0, dlsym(h, "_Unwind_GetIP"), dlsym(h, "_Unwind_GetCFA")};
	if (bt == NULL || arg.get_ip == NULL || arg.get_cfa == NULL) {
		fprintf(stderr, "libgcc_s lacks _Unwind_Backtrace\n");
		exit(3);
	}
	bt(dwarf_helper, &arg);
	if (arg.cnt > 1 && a[arg.cnt - 1] == NULL)
		--arg.cnt;
	return arg.cnt != -1 ? arg.cnt : 0;
}

__attribute__((noinline)) void capture(void)
{
	void *a[256];
	int n = trace_fn(a, trace_size);
	printf("frames %d\n", n);
	for (int i = 0; i < n; i++) {
		Dl_info info;
		if (dladdr(a[i], &info) && info.dli_fname != NULL) {
			const char *m = strrchr(info.dli_fname, '/');
			printf("frame %d %s+0x%lx %s\n", i, m ? m + 1 : info.dli_fname,
			       (unsigned long)((char *)a[i] - (char *)info.dli_fbase),
			       info.dli_sname ? info.dli_sname : "?");
		} else
			printf("frame %d %p ?\n", i, a[i]);
	}
	if (trace_fn == backtrace) {
		/* Could glibc's fallback have found libgcc's unwinder? */
		void *h = dlopen("libgcc_s.so.1", RTLD_NOW);
		printf("libgcc_s %s\n", h ? "reachable" : "unreachable");
	}
	fflush(stdout);
}

void on_segv(int sig, siginfo_t *si, void *uc)
{
	(void)sig, (void)si, (void)uc;
	capture();
	_exit(0);
}

int *volatile fault_ptr;

__attribute__((noinline)) int leaf(int x)
{
	if (fault)
		*fault_ptr = x; /* SIGSEGV: fault_ptr is NULL */
	else
		capture();
	__asm__ volatile("" ::: "memory");
	return x + 1;
}

int compare(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	leaf(x);
	__asm__ volatile("" ::: "memory");
	return (x > y) - (x < y);
}

__attribute__((noinline)) int prog_callback(void)
{
	int v[2] = {2, 1};
	qsort(v, 2, sizeof v[0], compare);
	__asm__ volatile("" ::: "memory");
	return v[0];
}

__attribute__((noinline)) int alloca_level(int n)
{
	char *p = __builtin_alloca(64 + n * 16);
	memset(p, n, 64 + n * 16);
	__asm__ volatile("" : : "r"(p) : "memory");
	int r = lib_level(2, prog_callback);
	__asm__ volatile("" ::: "memory");
	return r + p[3];
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: %s sframe|dwarf chain|signal SIZE [LIBGCC_S]\n", argv[0]);
		return 2;
	}
	trace_fn = strcmp(argv[1], "dwarf") == 0 ? dwarf_backtrace : backtrace;
	if (trace_fn == dwarf_backtrace) {
		if (argc < 5) {
			fprintf(stderr, "dwarf needs the path of libgcc_s.so.1\n");
			return 2;
		}
		libgcc_path = argv[4];
	}
	fault = strcmp(argv[2], "signal") == 0;
	trace_size = atoi(argv[3]);
	if (trace_size < 1 || trace_size > 256)
		trace_size = 256;
	if (fault) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_sigaction = on_segv;
		sa.sa_flags = SA_SIGINFO;
		sigaction(SIGSEGV, &sa, NULL);
	}
	int r = fp_level(3);
	__asm__ volatile("" ::: "memory");
	return r == 12345;
}
