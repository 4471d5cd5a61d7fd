/* hook/interposers/symver_probe/real.c — stands for a real CUDA library whose
 * symbols are versioned (real.map), like libcudart.so.13's. */
int xpu_symver_probe(void) { return 1; }
