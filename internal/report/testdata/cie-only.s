# A program whose .eh_frame holds no FDE (ld drops the unused CIE and
# keeps the terminator): cfi2sframe converts nothing in it, and the
# report still counts it (TestNoFDE).
	.text
	.globl _start
_start:
	mov $60, %eax
	xor %edi, %edi
	syscall
	.section .eh_frame,"a",@progbits
cie:
	.long cie_end - cie_id
cie_id:
	.long 0
	.byte 1
	.string "zR"
	.uleb128 1
	.sleb128 -8
	.uleb128 16
	.uleb128 1
	.byte 0x1b
	.byte 0x0c, 7, 8
	.byte 0x90, 1
	.balign 8
cie_end:
	.long 0
