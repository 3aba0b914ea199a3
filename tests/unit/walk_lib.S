/* A library for tests/unit/test_walk.c's unload case, built twice (walk_lib_a.so: FRAME = 0x88,
 * walk_lib_b.so: FRAME = 0x108). Both versions have the same code bytes' layout (sub with a 32-bit
 * immediate in each), so walk_lib_hop and its return address sit at the same offsets; only the frame size
 * and its unwind rule differ. Loaded one after the other at the same place, a rule kept from the first
 * describes the second wrongly. walk_lib_hop(next, arg) calls next(arg). */
    .text
    .globl walk_lib_hop
    .type walk_lib_hop, @function
    .p2align 4
walk_lib_hop:
    .cfi_startproc
    sub $FRAME, %rsp
    .cfi_adjust_cfa_offset FRAME
    mov %rdi, %rax
    mov %rsi, %rdi
    call *%rax
    nop
    add $FRAME, %rsp
    .cfi_adjust_cfa_offset -FRAME
    ret
    .cfi_endproc
    .size walk_lib_hop, .-walk_lib_hop

    .section .note.GNU-stack,"",@progbits
