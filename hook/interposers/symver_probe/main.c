/* hook/interposers/symver_probe/main.c — linked against libxpu_symver_real.so,
 * so its reference to xpu_symver_probe is versioned; prints what answered
 * (1: the real library, 101: the interposer forwarding to it). */
#include <stdio.h>

int xpu_symver_probe(void);

int main(void) {
  printf("probe=%d\n", xpu_symver_probe());
  return 0;
}
