# The few outside functions flow.c calls, without CFI: the test is
# about flow.c's code.
	.text
	.globl abort, memset, sink, sinkp, __stack_chk_fail
abort:
__stack_chk_fail:
	hlt
memset:
	mov %rdi,%rax
	ret
sink:
	lea 1(%rdi),%eax
	ret
sinkp:
	xor %eax,%eax
	ret
	.section .note.GNU-stack,"",@progbits
