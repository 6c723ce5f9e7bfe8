# etc: filled in by its issue

# Example bandwidth caches (pipette-bw/1): synthetic, made by the seeded,
# deterministic `pipette bandwidth generate`; each file records its command
# in "generator".  `make regen-examples` remakes them; test_bwcache checks
# that rerunning each file's command gives the same bytes.
examplesdir = $(pkgdatadir)/examples
dist_examples_DATA = \
	etc/examples/uniform-4x8-h100.json \
	etc/examples/hetero-8x8-h100.json \
	etc/examples/hetero-16x8-h100.json \
	etc/examples/hetero-128x8-h100.json
EXTRA_DIST += etc/examples/README.md

BW_GENERATE = ./pipette$(EXEEXT) bandwidth generate --gpu H100 --gpus-per-node 8 --efficiency 0.9
regen-examples: pipette$(EXEEXT)
	$(BW_GENERATE) --seed 1 --nodes 4 --noise 0 \
		-o $(srcdir)/etc/examples/uniform-4x8-h100.json
	$(BW_GENERATE) --seed 8 --nodes 8 --switch-size 4 --cross-factor 0.85 \
		--slow-links 0.15 --degraded-nvlink 6 \
		-o $(srcdir)/etc/examples/hetero-8x8-h100.json
	$(BW_GENERATE) --seed 16 --nodes 16 --switch-size 4 --cross-factor 0.9 \
		--slow-switch 3:0.6 --slow-links 0.1 --degraded-nvlink 6 \
		-o $(srcdir)/etc/examples/hetero-16x8-h100.json
	$(BW_GENERATE) --seed 128 --nodes 128 --switch-size 16 --cross-factor 0.9 \
		--slow-switch 5:0.6 --slow-links 0.05 --degraded-nvlink 77 \
		-o $(srcdir)/etc/examples/hetero-128x8-h100.json
.PHONY: regen-examples

# The plugstack.conf snippet for spank_pipette.so, installed where Debian's
# /etc/slurm/plugstack.conf includes it from ("include
# /etc/slurm/plugstack.conf.d/*.conf", package slurm-wlm-basic-plugins) when
# configured with --sysconfdir=/etc.  Every line is a comment, so installing
# it enables nothing: the admin uncomments the plugin line.
plugstackdir = $(sysconfdir)/slurm/plugstack.conf.d
dist_plugstack_DATA = etc/plugstack.conf.d/pipette.conf
