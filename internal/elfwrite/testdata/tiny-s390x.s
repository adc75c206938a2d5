	/* s390x (big-endian) fixture: write(1, "tiny\n", 5); exit(0). Built by build.sh. */
	.text
	.globl _start
_start:
	lghi %r2,1
	larl %r3,msg
	lghi %r4,5
	svc 4
	lghi %r2,0
	svc 1
	.section .rodata
msg:	.ascii "tiny\n"
