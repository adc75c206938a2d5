	/* Big-endian AArch64 fixture: write(1, "tiny\n", 5); exit(0). Built by build.sh. */
	.text
	.globl _start
_start:
	mov x0, #1
	adr x1, msg
	mov x2, #5
	mov x8, #64
	svc #0
	mov x0, #0
	mov x8, #93
	svc #0
	.section .rodata
msg:	.ascii "tiny\n"
