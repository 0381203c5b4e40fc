/* What the registry keeps of a docker sandbox: sb->priv behind its own lock. */
#include "docker.h"
#include "../util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Docker's own state of a sandbox (sb->priv): its container, the spec it was
 * made from (restore and fork make new containers from it), the fork image
 * it was made from (removed with it) and snapshot images waiting for their
 * last container to go.  Written by the op holder, read by FUSE workers and
 * the journal engine (dk_current), so it sits behind dk_saved_mu, a leaf
 * lock (provider.h's lock order): nothing else is taken while it is held.
 * It reaches the registry through the state hooks as pdata {"container",
 * "spec", "fork_image", "doomed"}, the shape earlier builds kept in the
 * shared pdata blob, so their registries load unchanged. */
struct dk_saved {
	char container[DK_ID_MAX]; /* "" = none */
	bool has_spec;
	struct dk_spec spec;
	char fork_image[DK_ID_MAX]; /* "" = none */
	json_t *doomed;		    /* array of image ids, or NULL */
};
static pthread_mutex_t dk_saved_mu = PTHREAD_MUTEX_INITIALIZER;

/* sb's state, made when missing.  Call with dk_saved_mu. */
static struct dk_saved *saved_locked(struct sfs_sandbox *sb)
{
	if (!sb->priv)
		sb->priv = calloc(1, sizeof(struct dk_saved));
	return sb->priv;
}

json_t *dk_state_save(const struct sfs_sandbox *sb)
{
	pthread_mutex_lock(&dk_saved_mu);
	const struct dk_saved *s = sb->priv;
	json_t *o = s ? json_object() : NULL;
	int r = 0;
	if (o && s->container[0])
		r |= json_object_set_new(o, "container", json_string(s->container));
	if (o && s->has_spec) {
		json_t *spec = dk_spec_to_json(&s->spec);
		r |= spec ? json_object_set_new(o, "spec", spec) : -1;
	}
	if (o && s->fork_image[0])
		r |= json_object_set_new(o, "fork_image", json_string(s->fork_image));
	if (o && s->doomed && json_array_size(s->doomed))
		r |= json_object_set_new(o, "doomed", json_deep_copy(s->doomed));
	pthread_mutex_unlock(&dk_saved_mu);
	if (r) {
		/* out of memory: no pdata; a restart then adopts sb->id, the container */
		json_decref(o);
		return NULL;
	}
	return o;
}

int dk_state_load(struct sfs_sandbox *sb, json_t *saved, struct sfs_err *err)
{
	if (!saved)
		return 0; /* resume adopts sb->id */
	struct dk_saved *s = calloc(1, sizeof(*s));
	if (!s)
		return sfs_errf(err, -ENOMEM, "out of memory");
	const char *c = json_string_value(json_object_get(saved, "container"));
	const char *fi = json_string_value(json_object_get(saved, "fork_image"));
	if (sfs_pathf(s->container, sizeof(s->container), "%s", c ? c : "") < 0 ||
	    sfs_pathf(s->fork_image, sizeof(s->fork_image), "%s", fi ? fi : "") < 0) {
		free(s);
		return sfs_errf(err, -EIO, "docker: %s: a saved container or image id is too long",
				sb->name);
	}
	/* a missing or bad spec fails restore and fork later, with a message */
	s->has_spec = dk_spec_from_json(json_object_get(saved, "spec"), &s->spec) == 0;
	json_t *doomed = json_object_get(saved, "doomed");
	if (json_is_array(doomed) && !(s->doomed = json_deep_copy(doomed))) {
		free(s);
		return sfs_errf(err, -ENOMEM, "out of memory");
	}
	pthread_mutex_lock(&dk_saved_mu);
	struct dk_saved *old = sb->priv;
	sb->priv = s;
	pthread_mutex_unlock(&dk_saved_mu);
	if (old)
		json_decref(old->doomed);
	free(old);
	return 0;
}

void dk_state_free(struct sfs_sandbox *sb)
{
	pthread_mutex_lock(&dk_saved_mu);
	struct dk_saved *s = sb->priv;
	sb->priv = NULL;
	pthread_mutex_unlock(&dk_saved_mu);
	if (s)
		json_decref(s->doomed);
	free(s);
}

void dk_saved_container(struct sfs_sandbox *sb, char *cid, size_t len)
{
	pthread_mutex_lock(&dk_saved_mu);
	const struct dk_saved *s = sb->priv;
	(void)!sfs_pathf(cid, len, "%s", s ? s->container : ""); /* "" (none) if it does not fit */
	pthread_mutex_unlock(&dk_saved_mu);
}

int dk_saved_spec(struct sfs_sandbox *sb, struct dk_spec *spec)
{
	pthread_mutex_lock(&dk_saved_mu);
	const struct dk_saved *s = sb->priv;
	bool has = s && s->has_spec;
	if (has)
		*spec = s->spec;
	pthread_mutex_unlock(&dk_saved_mu);
	return has ? 0 : -EINVAL;
}

void dk_saved_fork_image(struct sfs_sandbox *sb, char *id, size_t len)
{
	pthread_mutex_lock(&dk_saved_mu);
	const struct dk_saved *s = sb->priv;
	(void)!sfs_pathf(id, len, "%s", s ? s->fork_image : ""); /* "" (none) if it does not fit */
	pthread_mutex_unlock(&dk_saved_mu);
}

int dk_saved_set(struct sfs_sandbox *sb, const char *cid, const struct dk_spec *spec,
		 const char *fork_image)
{
	pthread_mutex_lock(&dk_saved_mu);
	struct dk_saved *s = saved_locked(sb);
	if (s) {
		if (sfs_pathf(s->container, sizeof(s->container), "%s", cid) < 0)
			s->container[0] = '\0'; /* ids fit DK_ID_MAX: never */
		s->spec = *spec;
		s->has_spec = true;
		if (sfs_pathf(s->fork_image, sizeof(s->fork_image), "%s",
			      fork_image ? fork_image : "") < 0)
			s->fork_image[0] = '\0'; /* ids fit DK_ID_MAX: never */
		/* doomed images outlive the swap: they wait for the old container */
	}
	pthread_mutex_unlock(&dk_saved_mu);
	return s ? 0 : -ENOMEM;
}

int dk_saved_doom(struct sfs_sandbox *sb, const char *image_id)
{
	json_t *id = json_string(image_id);
	pthread_mutex_lock(&dk_saved_mu);
	struct dk_saved *s = saved_locked(sb);
	if (s && !s->doomed)
		s->doomed = json_array();
	int r = s && s->doomed && id ? json_array_append(s->doomed, id) : -1;
	pthread_mutex_unlock(&dk_saved_mu);
	json_decref(id);
	return r ? -ENOMEM : 0;
}

json_t *dk_saved_doomed(struct sfs_sandbox *sb)
{
	pthread_mutex_lock(&dk_saved_mu);
	const struct dk_saved *s = sb->priv;
	json_t *copy = s && s->doomed ? json_deep_copy(s->doomed) : NULL;
	pthread_mutex_unlock(&dk_saved_mu);
	return copy;
}

void dk_saved_undoom(struct sfs_sandbox *sb, json_t *deleted)
{
	pthread_mutex_lock(&dk_saved_mu);
	struct dk_saved *s = sb->priv;
	for (size_t i = 0; s && s->doomed && i < json_array_size(s->doomed);) {
		bool gone = false;
		size_t j;
		json_t *v;
		json_array_foreach(deleted, j, v) gone |=
		    json_equal(v, json_array_get(s->doomed, i));
		if (gone)
			json_array_remove(s->doomed, i);
		else
			i++;
	}
	pthread_mutex_unlock(&dk_saved_mu);
}
