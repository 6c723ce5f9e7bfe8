#include "json.h"

#include <limits.h>
#include <string.h>

static int is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

struct json_object *pipette_json_parse(const char *text, size_t len, const char *source,
				       int depth, struct pipette_err *err)
{
	struct json_tokener *tok;
	struct json_object *root;
	enum json_tokener_error jerr;
	size_t off, i;
	int line = 1, col = 1;

	if (len > (size_t)INT_MAX) {
		pipette_fail(err, "%s: %zu bytes are too many for a JSON document", source, len);
		return NULL;
	}
	if (!(tok = json_tokener_new_ex(depth))) {
		pipette_fail(err, "%s: out of memory", source);
		return NULL;
	}
	root = json_tokener_parse_ex(tok, text, (int)len);
	jerr = json_tokener_get_error(tok);
	off = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);
	if (!root || jerr != json_tokener_success) {
		if (jerr == json_tokener_continue)
			off = len;
		for (i = 0; i < off && i < len; i++) {
			if (text[i] == '\n') {
				line++;
				col = 1;
			} else {
				col++;
			}
		}
		json_object_put(root);
		pipette_fail(err, "%s: line %d, column %d: malformed JSON: %s", source, line,
			     col, jerr == json_tokener_success ? "the document is null"
			     : jerr == json_tokener_continue ? "unexpected end of file"
			     : json_tokener_error_desc(jerr));
		return NULL;
	}
	for (i = off; i < len; i++)
		if (!is_space(text[i])) {
			json_object_put(root);
			pipette_fail(err, "%s: malformed JSON: trailing data after the "
				     "top-level object (byte %zu)", source, i);
			return NULL;
		}
	return root;
}
