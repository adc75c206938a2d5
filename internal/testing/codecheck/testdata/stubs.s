# The few outside functions flow.c calls, without CFI: the test is
# about flow.c's code. Typed as functions, so that codeentry.Load
# takes them as entries and knows abort and __stack_chk_fail by name
# as calls that do not return.
	.text
	.globl abort, memset, sink, sinkp, __stack_chk_fail
	.type abort,@function
	.type __stack_chk_fail,@function
	.type memset,@function
	.type sink,@function
	.type sinkp,@function
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
