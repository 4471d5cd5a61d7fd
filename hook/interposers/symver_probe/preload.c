/* hook/interposers/symver_probe/preload.c — an interposer built like
 * libxpu_hook.so: unversioned definition (preload.map), forwarding to the next
 * definition found with dlsym(RTLD_NEXT), as ResolveReal does. */
#define _GNU_SOURCE
#include <dlfcn.h>

int xpu_symver_probe(void) {
  int (*real)(void) = (int (*)(void))dlsym(RTLD_NEXT, "xpu_symver_probe");
  return 100 + (real ? real() : 0);
}
