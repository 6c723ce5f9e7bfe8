# man: the manual pages, installed by `make install` into $(mandir)/manN and
# distributed (the Debian package installs whatever is listed: its
# debian/*.install must take usr/share/man/man1, man5 and man8).
dist_man_MANS = man/pipette.1 man/pipette-bandwidth.5 man/pipette-probe.8 \
	man/spank-pipette.8
EXTRA_DIST += man/README.md

# `make check-man` (part of `make check`):
#  1. every page renders with `groff -man -ww -z` without a single warning,
#     for terminals in ASCII (man under LANG=C) and in UTF-8;
#  2. the pages cannot silently go stale: every command of `pipette --help`
#     has its section in pipette.1, and every option of every command's
#     --help, every bandwidth subcommand and every option of
#     `pipette-probe --help` is named in its page; every option of
#     plugin/options.c, plugstack key of plugin/args.c, input variable of
#     plugin/parse.c and plugin/plugin.h and variable of the environment
#     contract (core/render/env.c), every Megatron-LM flag of core/render/megatron.c and every
#     NeMo key of core/render/nemo.c is named in spank-pipette.8; every key the cache reader accepts
#     (core/inputs/bwcache_parse.c) is named in pipette-bandwidth.5.
# Names are compared with the pages' source after removing the roff escapes
# \- and \fX.  Without groff (it comes with man-db, package groff-base) the
# rendering is skipped with a message; the staleness checks still run.
GROFF = groff
MAN_PLAIN = sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g'
# The string literals of a C file, its comments dropped: the flags the
# Megatron renderer and the keys the NeMo renderer emit, which the plugin
# exports (PIPETTE_MEGATRON_ARGS, PIPETTE_LAUNCH_ARGS).
C_STRINGS = sed -e 's|/\*.*\*/||' -e '/^ \*/d' -e '/^\/\*/d' | grep -oE '"[^"]*"'
# man_has PAGE NAME: the page names NAME, not followed by more of a name.
MAN_HAS = man_has() { $(MAN_PLAIN) "$(srcdir)/man/$$1" | \
	grep -qE -e "$$2([^A-Za-z0-9_-]|$$)" || { \
	echo "check-man: man/$$1 does not name $$2 ($$3)"; fail=1; }; }

check-man: pipette$(EXEEXT) pipette-probe$(EXEEXT)
	@fail=0; $(MAN_HAS); \
	if command -v $(GROFF) >/dev/null 2>&1; then \
	  for p in $(dist_man_MANS); do for t in ascii utf8; do \
	    out=`LC_ALL=C $(GROFF) -man -T$$t -ww -z "$(srcdir)/$$p" 2>&1` || fail=1; \
	    if test -n "$$out"; then echo "check-man: $$p (-T$$t):"; echo "$$out"; fail=1; fi; \
	  done; done; \
	else \
	  echo "check-man: $(GROFF) not found: the pages were not rendered"; \
	fi; \
	cmds=`./pipette$(EXEEXT) --help | sed -n '/^commands:/,/^$$/s/^  \([a-z][a-z-]*\) .*/\1/p'`; \
	test -n "$$cmds" || { echo "check-man: no commands in 'pipette --help'"; fail=1; }; \
	for c in $$cmds; do \
	  grep -q "^\.SS \"pipette $$c" "$(srcdir)/man/pipette.1" || { \
	    echo "check-man: man/pipette.1 has no section for 'pipette $$c'"; fail=1; }; \
	  for o in `./pipette$(EXEEXT) $$c --help | grep -oE -e '--[a-z][a-z0-9-]*' | sort -u`; do \
	    man_has pipette.1 "$$o" "pipette $$c --help"; \
	  done; \
	done; \
	subs=`./pipette$(EXEEXT) bandwidth --help | sed -n 's/^ *\(usage:\)\{0,1\} *pipette bandwidth \([a-z]*\) .*/\2/p'`; \
	test -n "$$subs" || { echo "check-man: no subcommands in 'pipette bandwidth --help'"; fail=1; }; \
	for s in $$subs; do man_has pipette.1 "bandwidth $$s" "pipette bandwidth --help"; done; \
	opts=`./pipette-probe$(EXEEXT) --help | grep -oE -e '--[a-z][a-z0-9-]*' | sort -u`; \
	test -n "$$opts" || { echo "check-man: no options in 'pipette-probe --help'"; fail=1; }; \
	for o in $$opts; do man_has pipette-probe.8 "$$o" "pipette-probe --help"; done; \
	opts=`sed -n 's/^[[:space:]]*{ "\(pipette-[a-z-]*\)".*/\1/p' "$(srcdir)/plugin/options.c"`; \
	test -n "$$opts" || { echo "check-man: no options in plugin/options.c"; fail=1; }; \
	for o in $$opts; do man_has spank-pipette.8 "--$$o" plugin/options.c; done; \
	keys=`sed -n 's/.*strcmp(key, "\([a-z_]*\)").*/\1/p' "$(srcdir)/plugin/args.c"`; \
	test -n "$$keys" || { echo "check-man: no keys in plugin/args.c"; fail=1; }; \
	for k in $$keys; do man_has spank-pipette.8 "$$k=" plugin/args.c; done; \
	vars=`grep -ohE '"PIPETTE_[A-Z_]+"' "$(srcdir)/plugin/parse.c" "$(srcdir)/plugin/plugin.h" | tr -d '"' | sort -u`; \
	vars="$$vars `sed -n '/contract\[\] = {/,/};/p' "$(srcdir)/core/render/env.c" | grep -oE '"[A-Z_]+"' | tr -d '"'`"; \
	test "`echo $$vars | wc -w`" -gt 20 || { echo "check-man: too few variables found in plugin/ and core/render/env.c"; fail=1; }; \
	for v in $$vars MASTER_PORT; do man_has spank-pipette.8 "$$v" "the environment contract"; done; \
	flags=`sed -n '1,/The FSDP sharding of a plan/p' "$(srcdir)/core/render/megatron.c" | $(C_STRINGS) | \
	  grep -oE -e '--[a-z][a-z0-9_-]*' | sort -u`; \
	test -n "$$flags" || { echo "check-man: no flags in core/render/megatron.c"; fail=1; }; \
	for f in $$flags; do man_has spank-pipette.8 "$$f" core/render/megatron.c; done; \
	keys=`cat "$(srcdir)/core/render/nemo.c" | $(C_STRINGS) | grep -oE '[a-z_]+([.][][a-z_0-9%]+)+=' | \
	  sed 's/=$$//; s/.*[.]//' | sort -u`; \
	test -n "$$keys" || { echo "check-man: no keys in core/render/nemo.c"; fail=1; }; \
	for k in $$keys; do man_has spank-pipette.8 "$$k" core/render/nemo.c; done; \
	keys=`sed -n '/keys\[\] = {/,/NULL };/p' "$(srcdir)/core/inputs/bwcache_parse.c" | grep -oE '"[a-z_]+"' | tr -d '"' | sort -u`; \
	test -n "$$keys" || { echo "check-man: no keys in core/inputs/bwcache_parse.c"; fail=1; }; \
	for k in $$keys; do man_has pipette-bandwidth.5 "$$k" core/inputs/bwcache_parse.c; done; \
	test $$fail = 0 && echo "check-man: $(dist_man_MANS): ok"; \
	exit $$fail
.PHONY: check-man
check-local: check-man
