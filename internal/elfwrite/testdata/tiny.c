/* A libc-free program for elfwrite's committed fixtures: prints "tiny\n"
   and exits 0 with raw system calls, so it runs under qemu-user without a
   sysroot. Built by build.sh. */
static const char msg[] = "tiny\n";

#if defined(__x86_64__)
void _start(void) {
	long r;
	__asm__ volatile("syscall" : "=a"(r) : "a"(1), "D"(1), "S"(msg), "d"(sizeof msg - 1) : "rcx", "r11", "memory");
	__asm__ volatile("syscall" : : "a"(60), "D"(0));
	for (;;) {}
}
#elif defined(__aarch64__)
void _start(void) {
	register long x0 __asm__("x0") = 1;
	register long x1 __asm__("x1") = (long)msg;
	register long x2 __asm__("x2") = sizeof msg - 1;
	register long x8 __asm__("x8") = 64;
	__asm__ volatile("svc 0" : "+r"(x0) : "r"(x1), "r"(x2), "r"(x8) : "memory");
	x0 = 0;
	x8 = 93;
	__asm__ volatile("svc 0" : "+r"(x0) : "r"(x8));
	for (;;) {}
}
#endif
