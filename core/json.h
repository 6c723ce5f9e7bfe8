/* pipette: reading JSON documents held in memory (json-c). */
#ifndef PIPETTE_JSON_H
#define PIPETTE_JSON_H

#include <stddef.h>

#include <json-c/json.h>

#include "error.h"

/* Parse the whole of text[len] (at most INT_MAX bytes) with json-c, nesting
 * at most `depth` levels.  Only white space may follow the document.  NULL
 * on error with "SOURCE: line L, column C: malformed JSON: why" or
 * "SOURCE: malformed JSON: trailing data after the top-level object (byte
 * N)"; a bare `null` document is an error too.  The caller owns the
 * result. */
struct json_object *pipette_json_parse(const char *text, size_t len, const char *source,
				       int depth, struct pipette_err *err);

#endif
