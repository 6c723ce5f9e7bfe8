#define _GNU_SOURCE	/* asprintf */
#include "inputs/json.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "inputs/versions.h"

static int is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

const char *pipette_json_type_name(struct json_object *o)
{
	switch (json_object_get_type(o)) {
	case json_type_null: return "null";
	case json_type_boolean: return "a boolean";
	case json_type_double:
	case json_type_int: return "a number";
	case json_type_object: return "an object";
	case json_type_array: return "an array";
	case json_type_string: return "a string";
	}
	return "something else";
}

/* "SOURCE: line L, column C: malformed JSON: why", at byte off of text. */
static void malformed(const char *text, size_t len, size_t off, const char *source,
		      const char *why, struct pipette_err *err)
{
	int line = 1, col = 1;
	size_t i;

	for (i = 0; i < off && i < len; i++) {
		if (text[i] == '\n') {
			line++;
			col = 1;
		} else {
			col++;
		}
	}
	pipette_fail(err, "%s: line %d, column %d: malformed JSON: %s", source, line, col,
		     why);
}

struct json_object *pipette_json_parse(const char *text, size_t len, const char *source,
				       int depth, struct pipette_err *err)
{
	struct json_tokener *tok;
	struct json_object *root;
	enum json_tokener_error jerr;
	size_t off, i;

	if (len > (size_t)INT_MAX) {
		pipette_fail(err, "%s: %zu bytes are too many for a JSON document", source, len);
		return NULL;
	}
	if (!(tok = json_tokener_new_ex(depth))) {
		pipette_fail(err, "%s: out of memory", source);
		return NULL;
	}
	/* json-c reports a failed allocation as no error and no object, so
	 * that the rest of the text looks like garbage: glibc's ENOMEM from
	 * malloc tells it apart (a planner under plan_memory meets it). */
	errno = 0;
	root = json_tokener_parse_ex(tok, text, (int)len);
	jerr = json_tokener_get_error(tok);
	off = json_tokener_get_parse_end(tok);
	if (!root && errno == ENOMEM) {
		json_tokener_free(tok);
		pipette_fail_code(err, PIPETTE_E_LIMIT, "%s: out of memory while parsing %zu "
				  "bytes of JSON", source, len);
		return NULL;
	}
	if (jerr == json_tokener_continue) {
		/* A bare literal at the very end ("null", "12" without a
		 * newline) is complete only once json-c sees a terminator:
		 * hand it the string's NUL.  Anything else is truncated. */
		root = json_tokener_parse_ex(tok, "", 1);
		jerr = json_tokener_get_error(tok);
		if (jerr != json_tokener_success) {
			json_object_put(root);
			json_tokener_free(tok);
			malformed(text, len, len, source, "unexpected end of file", err);
			return NULL;
		}
		off = len;
	}
	json_tokener_free(tok);
	if (jerr != json_tokener_success) {
		json_object_put(root);
		malformed(text, len, off, source, json_tokener_error_desc(jerr), err);
		return NULL;
	}
	for (i = off; i < len; i++)
		if (!is_space(text[i])) {
			json_object_put(root);
			malformed(text, len, i, source, "text after the top-level object", err);
			return NULL;
		}
	/* json-c's null is a NULL object. */
	if (!root || !json_object_is_type(root, json_type_object)) {
		pipette_fail(err, "%s: top level is %s, expected a JSON object", source,
			     pipette_json_type_name(root));
		json_object_put(root);
		return NULL;
	}
	return root;
}

struct json_object *pipette_json_read(const char *path, const char *what, size_t max,
				      int depth, unsigned char sha256[PIPETTE_SHA256_LEN],
				      struct pipette_err *err)
{
	struct pipette_file f;
	struct json_object *root;

	if (pipette_read_file(path, what, max, &f, err))
		return NULL;
	root = pipette_json_parse(f.data, f.len, path, depth, err);
	if (root && sha256)
		memcpy(sha256, f.sha256, PIPETTE_SHA256_LEN);
	pipette_file_free(&f);
	return root;
}

/* replace: 0 or 1 (pipette_write_file); 2: replace keeping versions of at
 * most `max` bytes (pipette_versions_write_file). */
static int write_doc(const char *path, const char *what, struct json_object *o, unsigned mode,
		     int replace, size_t max, struct pipette_err *err)
{
	const char *text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY |
							     JSON_C_TO_STRING_NOSLASHESCAPE);
	char *doc;
	int rv;

	if (!text || asprintf(&doc, "%s\n", text) < 0)
		return pipette_fail(err, "%s: %s: out of memory", what, path);
	if (replace == 2)
		rv = pipette_versions_write_file(path, what, doc, strlen(doc), mode, max, err);
	else
		rv = pipette_write_file(path, what, doc, strlen(doc), mode, replace, err);
	free(doc);
	return rv;
}

int pipette_json_write_file(const char *path, const char *what, struct json_object *o,
			    unsigned mode, int replace, struct pipette_err *err)
{
	return write_doc(path, what, o, mode, replace ? 1 : 0, 0, err);
}

int pipette_json_write_versioned(const char *path, const char *what, struct json_object *o,
				 unsigned mode, size_t max, struct pipette_err *err)
{
	return write_doc(path, what, o, mode, 2, max, err);
}

int pipette_json_number(struct json_object *obj, const char *key, const char *src,
			double *out, struct pipette_err *err)
{
	struct json_object *v;

	if (!obj || !json_object_object_get_ex(obj, key, &v))
		return pipette_fail(err, "%s: %s: missing", src, key);
	if (json_object_get_type(v) != json_type_double && json_object_get_type(v) != json_type_int)
		return pipette_fail(err, "%s: %s: expected a number, got %s", src, key,
				    pipette_json_type_name(v));
	*out = json_object_get_double(v);
	if (!isfinite(*out))
		return pipette_fail(err, "%s: %s: not a finite number", src, key);
	return 0;
}

int pipette_json_string(struct json_object *obj, const char *key, const char *src,
			char *out, size_t len, struct pipette_err *err)
{
	struct json_object *v;
	const char *s;

	if (!obj || !json_object_object_get_ex(obj, key, &v))
		return pipette_fail(err, "%s: %s: missing", src, key);
	if (json_object_get_type(v) != json_type_string)
		return pipette_fail(err, "%s: %s: expected a string, got %s", src, key,
				    pipette_json_type_name(v));
	s = json_object_get_string(v);
	if (strlen(s) >= len || !*s)
		return pipette_fail(err, "%s: %s: '%.40s' is empty or longer than %zu bytes",
				    src, key, s, len - 1);
	strcpy(out, s);
	return 0;
}
