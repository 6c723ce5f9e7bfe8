/* pipette: reading JSON documents (json-c), from memory or from a file. */
#ifndef PIPETTE_JSON_H
#define PIPETTE_JSON_H

#include <stddef.h>

#include <json-c/json.h>

#include "inputs/error.h"
#include "inputs/readfile.h"

/* Parse the whole of text[len] (at most INT_MAX bytes) with json-c, nesting
 * at most `depth` levels.  The top level must be an object and only white
 * space may follow it.  NULL on error, with one wording for every input:
 *   "SOURCE: line L, column C: malformed JSON: REASON"
 * where REASON is json-c's, "unexpected end of file" or "text after the
 * top-level object"; or "SOURCE: top level is null, expected a JSON
 * object" (an array, a number, ...).  The caller owns the result. */
struct json_object *pipette_json_parse(const char *text, size_t len, const char *source,
				       int depth, struct pipette_err *err);

/* "null", "a boolean", "a number", "a string", "an array", "an object":
 * what a value is, for messages ("expected a number, got a string"). */
const char *pipette_json_type_name(struct json_object *o);

/* Read `path` with pipette_read_file (at most max bytes; `what` names the
 * input in its errors) and parse it as above, the path as SOURCE.  When
 * sha256 is not NULL it receives the digest of the bytes read. */
struct json_object *pipette_json_read(const char *path, const char *what, size_t max,
				      int depth, unsigned char sha256[PIPETTE_SHA256_LEN],
				      struct pipette_err *err);

/* obj[key] (obj may be NULL) as a finite number, or a non-empty string of
 * at most len - 1 bytes.  Errors name the source and the key: "SRC: KEY:
 * missing", "SRC: KEY: expected a number, got a string", "SRC: KEY: not a
 * finite number", "SRC: KEY: '...' is empty or longer than N bytes". */
int pipette_json_number(struct json_object *obj, const char *key, const char *src,
			double *out, struct pipette_err *err);
int pipette_json_string(struct json_object *obj, const char *key, const char *src,
			char *out, size_t len, struct pipette_err *err);

/* Write `o`, pretty-printed with one trailing newline, with
 * pipette_write_file (the same returns). */
int pipette_json_write_file(const char *path, const char *what, struct json_object *o,
			    unsigned mode, int replace, struct pipette_err *err);
/* The same, replacing path and keeping the versions of an input steps pin
 * (versions.h; max: the most bytes the file's readers take). */
int pipette_json_write_versioned(const char *path, const char *what, struct json_object *o,
				 unsigned mode, size_t max, struct pipette_err *err);

#endif
