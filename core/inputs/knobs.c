#include "inputs/knobs.h"

#include <strings.h>

static const char *const attention_names[] = { "flash", "unfused" };
static const char *const schedule_names[PIPETTE_SCHED_COUNT] = {
	"1f1b", "interleaved", "zb-h1", "v-min", "v-half", "v-zb",
	"gpipe", "interleaved-zb", "zbv", "dualpipe-v", "dualpipe",
};

int pipette_name_index(const char *s, const char *const *names, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (!strcasecmp(s, names[i]))
			return i;
	return -1;
}

int pipette_schedule_is_v(enum pipette_schedule_kind k)
{
	return k == PIPETTE_SCHED_V_MIN || k == PIPETTE_SCHED_V_HALF ||
	       k == PIPETTE_SCHED_V_ZB || k == PIPETTE_SCHED_ZBV ||
	       pipette_schedule_is_dualpipe(k);
}

int pipette_schedule_is_dualpipe(enum pipette_schedule_kind k)
{
	return k == PIPETTE_SCHED_DUALPIPE_V || k == PIPETTE_SCHED_DUALPIPE;
}

int pipette_schedule_is_looped(enum pipette_schedule_kind k)
{
	return k == PIPETTE_SCHED_INTERLEAVED || k == PIPETTE_SCHED_INTERLEAVED_ZB;
}

int pipette_schedule_splits_w(enum pipette_schedule_kind k)
{
	return k != PIPETTE_SCHED_1F1B && k != PIPETTE_SCHED_INTERLEAVED &&
	       k != PIPETTE_SCHED_GPIPE;
}

const char *pipette_attention_name(enum pipette_attention a)
{
	return (unsigned)a < 2 ? attention_names[a] : "?";
}

int pipette_attention_parse(const char *s, enum pipette_attention *out,
			    struct pipette_err *err)
{
	int i = pipette_name_index(s, attention_names, 2);

	if (i < 0)
		return pipette_fail(err, "attention '%.32s': expected flash or unfused", s);
	*out = (enum pipette_attention)i;
	return 0;
}

const char *pipette_schedule_name(enum pipette_schedule_kind k)
{
	return (unsigned)k < PIPETTE_SCHED_COUNT ? schedule_names[k] : "?";
}

int pipette_schedule_parse(const char *s, enum pipette_schedule_kind *out,
			   struct pipette_err *err)
{
	int i = pipette_name_index(s, schedule_names, PIPETTE_SCHED_COUNT);

	if (i < 0)
		return pipette_fail(err, "schedule '%.32s': expected 1f1b, interleaved, "
				    "zb-h1, v-min, v-half, v-zb, gpipe, interleaved-zb, zbv or "
				    "dualpipe-v", s);
	*out = (enum pipette_schedule_kind)i;
	return 0;
}
