/* A download written into a file: the sink every provider's fs_read uses. */
#include "http.h"

#include <errno.h>
#include <unistd.h>

int sfs_http_fd_sink(const void *data, size_t len, void *arg)
{
	struct sfs_http_fd *s = arg;
	const char *p = data;
	while (len) {
		ssize_t w = pwrite(s->fd, p, len, s->pos);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		len -= (size_t)w;
		s->pos += w;
	}
	return 0;
}

int sfs_http_fd_rewind(void *arg)
{
	struct sfs_http_fd *s = arg;
	s->pos = 0;
	return ftruncate(s->fd, 0);
}
