// hook/exports_unittest.cc — checks the dynamic symbol table of the built
// libxpu_hook.so against hook/libxpu_hook.map:
//  * every defined dynamic symbol is listed in the map's global section (by
//    name, or by the xpu_* pattern) — nothing internal leaks out;
//  * every listed name is defined — no interposer silently missing;
//  * every listed interposer is a symbol that the real CUDA / NCCL library
//    exports (when the toolkit is installed), so a misspelt name or a
//    macro-renamed definition (_v2, _ptsz) cannot hide.
// The ELF files are parsed directly, so the test needs no binutils.
// Thread-safety: single-threaded test.
#include <elf.h>
#include <fnmatch.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#ifndef XPU_HOOK_SO
#error "XPU_HOOK_SO must name the built libxpu_hook.so"
#endif

namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Reads `len` bytes at `off` of an open file; false on a short read.
bool ReadAt(std::ifstream& in, uint64_t off, void* buf, size_t len) {
  in.clear();
  in.seekg(static_cast<std::streamoff>(off));
  in.read(static_cast<char*>(buf), static_cast<std::streamsize>(len));
  return static_cast<size_t>(in.gcount()) == len;
}

// Defined global/weak symbols of an ELF64 shared object's .dynsym. Reads only
// the headers and the two sections (libcublasLt is half a gigabyte). Returns
// false if the file is not a readable ELF64 object.
bool DefinedDynamicSymbols(const std::string& path, std::set<std::string>* out) {
  std::ifstream in(path, std::ios::binary);
  Elf64_Ehdr eh;
  if (!in || !ReadAt(in, 0, &eh, sizeof(eh)) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_shoff == 0 ||
      eh.e_shentsize != sizeof(Elf64_Shdr)) {
    return false;
  }
  std::vector<Elf64_Shdr> sh(eh.e_shnum);
  if (!ReadAt(in, eh.e_shoff, sh.data(), sh.size() * sizeof(Elf64_Shdr))) return false;
  for (const Elf64_Shdr& s : sh) {
    if (s.sh_type != SHT_DYNSYM) continue;
    if (s.sh_link >= sh.size()) return false;
    std::vector<Elf64_Sym> syms(s.sh_size / sizeof(Elf64_Sym));
    std::string strtab(sh[s.sh_link].sh_size, '\0');
    if (!ReadAt(in, s.sh_offset, syms.data(), syms.size() * sizeof(Elf64_Sym)) ||
        !ReadAt(in, sh[s.sh_link].sh_offset, strtab.data(), strtab.size())) {
      return false;
    }
    for (size_t i = 1; i < syms.size(); ++i) {
      const Elf64_Sym& sym = syms[i];
      const int bind = ELF64_ST_BIND(sym.st_info);
      if (sym.st_shndx == SHN_UNDEF || (bind != STB_GLOBAL && bind != STB_WEAK)) continue;
      if (sym.st_name >= strtab.size()) return false;
      out->insert(std::string(strtab.c_str() + sym.st_name));
    }
    return true;
  }
  return false;
}

struct VersionScript {
  std::set<std::string> names;     // exact names in "global:"
  std::vector<std::string> globs;  // patterns (contain '*' or '?')
  bool local_all = false;          // "local: *;" present
};

// Minimal parser for the single anonymous node this project uses.
VersionScript ParseMap(const std::string& text) {
  std::string s;
  // Strip /* */ and # comments.
  for (size_t i = 0; i < text.size();) {
    if (text.compare(i, 2, "/*") == 0) {
      const size_t end = text.find("*/", i + 2);
      i = end == std::string::npos ? text.size() : end + 2;
    } else if (text[i] == '#') {
      while (i < text.size() && text[i] != '\n') ++i;
    } else {
      s += text[i++];
    }
  }
  VersionScript vs;
  const size_t g = s.find("global:");
  const size_t l = s.find("local:");
  if (g == std::string::npos) return vs;
  std::stringstream globals(
      s.substr(g + 7, l == std::string::npos ? std::string::npos : l - g - 7));
  std::string item;
  while (std::getline(globals, item, ';')) {
    const size_t b = item.find_first_not_of(" \t\r\n");
    if (b == std::string::npos) continue;
    const size_t e = item.find_last_not_of(" \t\r\n");
    const std::string name = item.substr(b, e - b + 1);
    if (name.find_first_of("*?") != std::string::npos) {
      vs.globs.push_back(name);
    } else {
      vs.names.insert(name);
    }
  }
  if (l != std::string::npos) {
    const std::string rest = s.substr(l + 6);
    const size_t star = rest.find('*');
    vs.local_all = star != std::string::npos && rest.find_first_not_of(" \t\r\n") == star;
  }
  return vs;
}

std::string MapPath() {
#ifdef XPU_HOOK_MAP_FILE
  return XPU_HOOK_MAP_FILE;  // absolute, from the build
#else
  // This file sits next to the map in the source tree (__FILE__ is relative
  // to the build directory under Ninja, hence the definition above).
  std::string here = __FILE__;
  return here.substr(0, here.rfind('/') + 1) + "libxpu_hook.map";
#endif
}

bool MatchesGlob(const VersionScript& vs, const std::string& name) {
  for (const std::string& g : vs.globs) {
    if (fnmatch(g.c_str(), name.c_str(), 0) == 0) return true;
  }
  return false;
}

class ExportsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string map_text = ReadFile(MapPath());
    ASSERT_FALSE(map_text.empty()) << "cannot read " << MapPath();
    map_ = ParseMap(map_text);
    ASSERT_TRUE(DefinedDynamicSymbols(XPU_HOOK_SO, &exported_)) << "cannot parse " << XPU_HOOK_SO;
  }
  VersionScript map_;
  std::set<std::string> exported_;
};

TEST(VersionScriptParserTest, SplitsNamesGlobsAndLocal) {
  const VersionScript vs =
      ParseMap("/* c */ {\n global:\n  a; /* x; */ b_c;\n xpu_*;\n local:\n  *;\n};\n");
  EXPECT_EQ(vs.names, (std::set<std::string>{"a", "b_c"}));
  ASSERT_EQ(vs.globs.size(), 1u);
  EXPECT_EQ(vs.globs[0], "xpu_*");
  EXPECT_TRUE(vs.local_all);
  EXPECT_FALSE(ParseMap("{ global: a; local: b; };").local_all);
}

TEST_F(ExportsTest, MapEndsWithLocalStar) {
  EXPECT_TRUE(map_.local_all);
  EXPECT_FALSE(map_.names.empty());
}

TEST_F(ExportsTest, NothingOutsideTheMapIsExported) {
  for (const std::string& sym : exported_) {
    EXPECT_TRUE(map_.names.count(sym) || MatchesGlob(map_, sym))
        << sym << " is exported but not listed in libxpu_hook.map";
  }
}

TEST_F(ExportsTest, EveryListedSymbolIsExported) {
  for (const std::string& name : map_.names) {
    EXPECT_TRUE(exported_.count(name)) << name << " is listed but not defined by the hook";
  }
  for (const std::string& g : map_.globs) {
    bool any = false;
    for (const std::string& sym : exported_) any = any || fnmatch(g.c_str(), sym.c_str(), 0) == 0;
    EXPECT_TRUE(any) << "no exported symbol matches " << g;
  }
}

TEST_F(ExportsTest, CoreEntryPointsPresent) {
  // The launch paths an application actually takes in CUDA 13 / NCCL 2.28.
  for (const char* name :
       {"__cudaLaunchKernel", "cudaLaunchKernel", "cudaLaunchKernel_ptsz", "cuLaunchKernel",
        "cuGetProcAddress_v2", "cublasGemmEx", "cublasSgemm_v2", "cublasLtMatmul", "ncclAllReduce",
        "ncclGroupEnd", "ncclCommInitRank", "xpu_comm_last_seq"}) {
    EXPECT_TRUE(exported_.count(name)) << name;
  }
  // The macro names of cublas_v2.h must not have become definitions.
  EXPECT_FALSE(exported_.count("cublasSgemm"));
  EXPECT_FALSE(exported_.count("cublasGetStream"));
}

// Every interposer name must be a symbol of the library it interposes.
TEST_F(ExportsTest, InterposersMatchRealLibraryExports) {
  const char* env = std::getenv("XPU_CUDA_LIB_DIR");
  const std::string dir = env ? env : "/usr/local/cuda/lib64";
  std::set<std::string> real;
  bool found_all = true;
  for (const char* lib : {"libcudart.so.13", "libcublas.so.13", "libcublasLt.so.13", "libnccl.so.2",
                          "stubs/libcuda.so"}) {
    found_all = DefinedDynamicSymbols(dir + "/" + lib, &real) && found_all;
  }
  if (!found_all) GTEST_SKIP() << "CUDA 13 / NCCL libraries not found under " << dir;
  for (const std::string& name : map_.names) {
    EXPECT_TRUE(real.count(name)) << name << " is not exported by any real library";
  }
}

}  // namespace
