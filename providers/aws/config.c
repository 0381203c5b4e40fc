/*
 * AWS credentials, region and endpoints from env and the ~/.aws files
 * (provider-apis-aws-gcp.md §1.1-1.2).  Precedence, each step only when the
 * one before gave nothing:
 *   keys:     AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN)
 *             > credentials file [PROFILE] > config file [profile PROFILE]
 *   region:   aws.region > AWS_REGION > AWS_DEFAULT_REGION > config region > us-east-1
 *   endpoint: AWS_ENDPOINT_URL_<SVC> > AWS_ENDPOINT_URL > config endpoint_url > AWS host
 * (env keys beat a profile named by AWS_PROFILE, as in botocore).  Container
 * and instance-metadata credentials are not read (docs/deviations.md).
 */
#include "aws.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../redact.h"
#include "../strbuf.h"
#include "../util.h"

static const char *env(const char *name)
{
	const char *v = getenv(name);
	return v && *v ? v : NULL;
}

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

/* The file's text, or NULL when it cannot be read (a missing file is no error). */
static char *slurp(const char *path)
{
	char *text = NULL;
	size_t len;
	return sfs_read_file(path, &text, &len) ? NULL : text;
}

static void trim(const char **s, size_t *n)
{
	while (*n && isspace((unsigned char)**s)) {
		(*s)++;
		(*n)--;
	}
	while (*n && isspace((unsigned char)(*s)[*n - 1]))
		(*n)--;
}

char *aws_ini_get(const char *text, const char *section, const char *key)
{
	if (!text)
		return NULL;
	bool in = false;
	char parent[128] = ""; /* an empty "k =" opens nested "k.x = v" lines */
	for (const char *l = text; *l;) {
		const char *e = strchr(l, '\n');
		size_t n = e ? (size_t)(e - l) : strlen(l);
		const char *s = l;
		bool indented = n && (s[0] == ' ' || s[0] == '\t');
		l += n + (e ? 1 : 0);
		trim(&s, &n);
		if (!n || s[0] == '#' || s[0] == ';')
			continue;
		if (s[0] == '[') {
			const char *name = s + 1;
			size_t nl = n - 1;
			if (nl && name[nl - 1] == ']')
				nl--;
			trim(&name, &nl);
			in = strlen(section) == nl && !strncmp(name, section, nl);
			parent[0] = 0;
			continue;
		}
		if (!in)
			continue;
		const char *eq = memchr(s, '=', n);
		if (!eq)
			continue;
		const char *k = s, *v = eq + 1;
		size_t kn = (size_t)(eq - s), vn = n - kn - 1;
		trim(&k, &kn);
		trim(&v, &vn);
		char full[256];
		if (indented && parent[0]) {
			if (sfs_pathf(full, sizeof(full), "%s.%.*s", parent, (int)kn, k) < 0)
				continue; /* a key too long is none asked for */
		} else if (!indented && !vn && kn < sizeof(parent)) {
			if (sfs_pathf(parent, sizeof(parent), "%.*s", (int)kn, k) < 0)
				parent[0] = 0;
		} else
			parent[0] = 0;
		if (!(indented && parent[0]) &&
		    sfs_pathf(full, sizeof(full), "%.*s", (int)kn, k) < 0)
			continue;
		if (!strcmp(full, key))
			return strndup(v, vn);
	}
	return NULL;
}

/* $HOME/.aws/NAME unless the env var names another file. */
static char *aws_file(const char *var, const char *name)
{
	const char *p = env(var);
	if (p)
		return strdup(p);
	const char *home = env("HOME");
	if (!home)
		return NULL;
	struct sfs_buf b = {0};
	if (sfs_buf_printf(&b, "%s/.aws/%s", home, name))
		return NULL;
	return sfs_buf_take(&b);
}

/* AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true drops the env and file overrides. */
static char *endpoint(const char *svc_var, const char *cfg_text, const char *cfg_section,
		      const char *fallback)
{
	const char *ign = env("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS");
	bool ignore = ign && !strcasecmp(ign, "true");
	const char *v = ignore ? NULL : env(svc_var);
	if (!v && !ignore)
		v = env("AWS_ENDPOINT_URL");
	char *cfgv = NULL;
	if (!v && !ignore)
		v = cfgv = aws_ini_get(cfg_text, cfg_section, "endpoint_url");
	char *r = strdup(v && *v ? v : fallback);
	free(cfgv);
	if (r) {
		size_t n = strlen(r);
		while (n && r[n - 1] == '/')
			r[--n] = 0;
	}
	return r;
}

int aws_config_load(struct aws_config *c, const char *region_opt, const char *addressing_opt,
		    struct sfs_err *err)
{
	memset(c, 0, sizeof(*c));
	const char *prof = env("AWS_PROFILE");
	bool named = prof != NULL;
	if (!prof)
		prof = "default";
	char *cred_path = aws_file("AWS_SHARED_CREDENTIALS_FILE", "credentials");
	char *cfg_path = aws_file("AWS_CONFIG_FILE", "config");
	char *cred_text = cred_path ? slurp(cred_path) : NULL;
	char *cfg_text = cfg_path ? slurp(cfg_path) : NULL;
	/* the config file names profiles "[profile NAME]", the default also "[default]" */
	char cfg_section[300];
	if (sfs_pathf(cfg_section, sizeof(cfg_section), "profile %s", prof) < 0) {
		free(cred_text);
		free(cfg_text);
		free(cred_path);
		free(cfg_path);
		return sfs_errf(err, -ENAMETOOLONG, "aws: profile name (AWS_PROFILE) too long");
	}
	if (!strcmp(prof, "default") && cfg_text && !strstr(cfg_text, "[profile default]"))
		snprintf(cfg_section, sizeof(cfg_section), "default");
	struct sfs_buf src = {0};
	int rc = 0;

	c->profile = strdup(prof);
	if (env("AWS_ACCESS_KEY_ID") && env("AWS_SECRET_ACCESS_KEY")) {
		c->access_key = strdup(env("AWS_ACCESS_KEY_ID"));
		c->secret_key = strdup(env("AWS_SECRET_ACCESS_KEY"));
		c->session_token = dup_or_null(env("AWS_SESSION_TOKEN"));
		rc = sfs_buf_adds(&src, "environment");
	} else {
		char *ak = aws_ini_get(cred_text, prof, "aws_access_key_id");
		char *sk = aws_ini_get(cred_text, prof, "aws_secret_access_key");
		const char *where = cred_path, *sect = prof;
		if (!ak || !sk) {
			free(ak);
			free(sk);
			ak = aws_ini_get(cfg_text, cfg_section, "aws_access_key_id");
			sk = aws_ini_get(cfg_text, cfg_section, "aws_secret_access_key");
			where = cfg_path;
			sect = cfg_section;
		}
		if (ak && sk) {
			c->access_key = ak;
			c->secret_key = sk;
			c->session_token = aws_ini_get(where == cred_path ? cred_text : cfg_text,
						       sect, "aws_session_token");
			if (!c->session_token)
				c->session_token =
				    aws_ini_get(where == cred_path ? cred_text : cfg_text, sect,
						"aws_security_token");
			rc = sfs_buf_printf(&src, "%s file %s [%s]",
					    where == cred_path ? "credentials" : "config", where,
					    sect);
		} else {
			free(ak);
			free(sk);
			bool seen = false;
			char hdr[320];
			if (!sfs_pathf(hdr, sizeof(hdr), "[%s]", prof))
				seen = (cred_text && strstr(cred_text, hdr));
			if (!sfs_pathf(hdr, sizeof(hdr), "[%s]", cfg_section))
				seen = seen || (cfg_text && strstr(cfg_text, hdr));
			if (named && !seen)
				rc = sfs_errf(
				    err, -ENOENT,
				    "aws: profile '%s' (AWS_PROFILE) is in neither %s nor %s", prof,
				    cred_path ? cred_path : "~/.aws/credentials",
				    cfg_path ? cfg_path : "~/.aws/config");
		}
	}
	/* the secret parts never reach a message or a log line */
	if (c->secret_key)
		sfs_redact_add_secret(c->secret_key);
	if (c->session_token)
		sfs_redact_add_secret(c->session_token);

	const char *reg = region_opt;
	if (!reg || !*reg)
		reg = env("AWS_REGION");
	if (!reg)
		reg = env("AWS_DEFAULT_REGION");
	char *cfg_reg = reg ? NULL : aws_ini_get(cfg_text, cfg_section, "region");
	c->region = strdup(reg ? reg : cfg_reg && *cfg_reg ? cfg_reg : AWS_DEFAULT_REGION);
	free(cfg_reg);

	char host[300];
	if (sfs_pathf(host, sizeof(host), "https://s3.%s.amazonaws.com", c->region) < 0 && !rc)
		rc = sfs_errf(err, -ENAMETOOLONG, "aws: region name too long");
	c->s3_endpoint = endpoint("AWS_ENDPOINT_URL_S3", cfg_text, cfg_section, host);
	/* a configured endpoint means path-style (botocore does the same: an
	 * emulator on 127.0.0.1 has no bucket subdomains) unless asked */
	const char *style = addressing_opt;
	char *cfg_style = aws_ini_get(cfg_text, cfg_section, "s3.addressing_style");
	if ((!style || !strcmp(style, "auto")) && cfg_style && strcmp(cfg_style, "auto"))
		style = cfg_style;
	c->s3_path_style = style && !strcmp(style, "path") ? true
			   : style && !strcmp(style, "virtual")
			       ? false
			       : c->s3_endpoint && strcmp(c->s3_endpoint, host) != 0;
	free(cfg_style);
	if (sfs_pathf(host, sizeof(host), "https://ecs.%s.amazonaws.com", c->region) < 0 && !rc)
		rc = sfs_errf(err, -ENAMETOOLONG, "aws: region name too long");
	c->ecs_endpoint = endpoint("AWS_ENDPOINT_URL_ECS", cfg_text, cfg_section, host);
	if (sfs_pathf(host, sizeof(host), "https://logs.%s.amazonaws.com", c->region) < 0 && !rc)
		rc = sfs_errf(err, -ENAMETOOLONG, "aws: region name too long");
	c->logs_endpoint =
	    endpoint("AWS_ENDPOINT_URL_CLOUDWATCH_LOGS", cfg_text, cfg_section, host);
	if (sfs_pathf(host, sizeof(host), "https://codebuild.%s.amazonaws.com", c->region) < 0 &&
	    !rc)
		rc = sfs_errf(err, -ENAMETOOLONG, "aws: region name too long");
	c->codebuild_endpoint = endpoint("AWS_ENDPOINT_URL_CODEBUILD", cfg_text, cfg_section, host);
	c->creds_source = sfs_buf_take(&src);

	if (!rc && (!c->profile || !c->region || !c->s3_endpoint || !c->ecs_endpoint ||
		    !c->logs_endpoint || !c->codebuild_endpoint || !c->creds_source ||
		    (c->access_key && !c->secret_key)))
		rc = sfs_errf(err, -ENOMEM, "aws: out of memory reading the configuration");
	free(cred_text);
	free(cfg_text);
	free(cred_path);
	free(cfg_path);
	if (rc)
		aws_config_free(c);
	return rc;
}

void aws_config_free(struct aws_config *c)
{
	free(c->access_key);
	if (c->secret_key)
		memset(c->secret_key, 0, strlen(c->secret_key));
	free(c->secret_key);
	free(c->session_token);
	free(c->region);
	free(c->profile);
	free(c->creds_source);
	free(c->s3_endpoint);
	free(c->ecs_endpoint);
	free(c->logs_endpoint);
	free(c->codebuild_endpoint);
	memset(c, 0, sizeof(*c));
}

const char *aws_config_missing(const struct aws_config *c)
{
	if (!c->access_key || !c->secret_key)
		return "credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or "
		       "aws_access_key_id/aws_secret_access_key of the profile in "
		       "~/.aws/credentials or ~/.aws/config)";
	return "";
}
