/* SPDX-License-Identifier: Apache-2.0 */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apps.h"
#include "fileio.h"
#include "macros.h"
#include "index.h"
#include "request.h"
#include "tests.h"

static int sys(int r)
{
	return r < 0 ? -errno : r;
}

static int parse(const char *text, SfsRequest *rq, char *err)
{
	return sfs_request_parse(text, strlen(text), rq, err, 512);
}

TEST(path_normalize)
{
	char out[SFS_PATH_MAX + 1], err[256];

	ASSERT_OK(sfs_path_normalize("a/b.txt", "/context", out, sizeof(out), err, sizeof(err)));
	ASSERT_STREQ(out, "a/b.txt");
	ASSERT_OK(sfs_path_normalize("/context/a//b/", "/context", out, sizeof(out), err,
				     sizeof(err)));
	ASSERT_STREQ(out, "a/b");
	ASSERT_OK(
		sfs_path_normalize("/context/x", "/context/", out, sizeof(out), err, sizeof(err)));
	ASSERT_STREQ(out, "x");
	ASSERT_ERROR(
		sfs_path_normalize("/contextx/a", "/context", out, sizeof(out), err, sizeof(err)),
		EINVAL);
	ASSERT_ERROR(sfs_path_normalize("/context", "/context", out, sizeof(out), err, sizeof(err)),
		     EINVAL);
	ASSERT_ERROR(sfs_path_normalize("a/../b", "/context", out, sizeof(out), err, sizeof(err)),
		     EINVAL);
	ASSERT_TRUE(strstr(err, "hidden") != NULL);
	ASSERT_ERROR(sfs_path_normalize("./a", "/context", out, sizeof(out), err, sizeof(err)),
		     EINVAL);
	ASSERT_ERROR(sfs_path_normalize(".secret", "/context", out, sizeof(out), err, sizeof(err)),
		     EINVAL);
	ASSERT_ERROR(
		sfs_path_normalize("/etc/passwd", "/context", out, sizeof(out), err, sizeof(err)),
		EINVAL);
	ASSERT_ERROR(sfs_path_normalize("", "/context", out, sizeof(out), err, sizeof(err)),
		     EINVAL);
	ASSERT_ERROR(sfs_path_normalize("a\nb", "/context", out, sizeof(out), err, sizeof(err)),
		     EINVAL);
	ASSERT_ERROR(sfs_path_normalize("\xff", "/context", out, sizeof(out), err, sizeof(err)),
		     EINVAL);
	ASSERT_ERROR(sfs_path_normalize("a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q", "/context", out,
					sizeof(out), err, sizeof(err)),
		     EINVAL);
}

TEST(request_shapes)
{
	SfsRequest rq;
	char err[512];

	ASSERT_OK(
		parse("{\"id\":\"1\",\"op\":\"register\",\"pid\":7,\"app\":\"notes\"}", &rq, err));
	ASSERT_EQ(rq.op, SFS_OP_REGISTER);
	ASSERT_EQ(rq.pid, 7);
	ASSERT_STREQ(rq.claimed_app, "notes");
	sfs_request_done(&rq);

	ASSERT_OK(parse("{\"id\":\"2\",\"op\":\"tag\",\"path\":\"/context/a.md\",\"task\":\"t\","
			"\"related_apps\":[\"notes\",\"notes\",\"feed\"]}",
			&rq, err));
	ASSERT_EQ(rq.op, SFS_OP_TAG);
	ASSERT_STREQ(rq.path, "a.md");
	ASSERT_STREQ(rq.task, "t");
	ASSERT_EQ(rq.n_related, 2);
	ASSERT_TRUE(rq.has_related);
	sfs_request_done(&rq);

	ASSERT_OK(parse("{\"id\":3,\"op\":\"tag\",\"path\":\"a\"}", &rq, err));
	ASSERT_TRUE(rq.task == NULL);
	ASSERT_FALSE(rq.has_related);
	sfs_request_done(&rq);

	ASSERT_OK(parse("{\"id\":\"4\",\"op\":\"query\",\"text\":\"x\"}", &rq, err));
	ASSERT_EQ(rq.limit, SFS_LIMIT_DEFAULT);
	sfs_request_done(&rq);
	ASSERT_OK(parse("{\"id\":\"4\",\"op\":\"query\",\"text\":\"x\",\"limit\":999}", &rq, err));
	ASSERT_EQ(rq.limit, SFS_LIMIT_MAX);
	sfs_request_done(&rq);
}

TEST(request_errors)
{
	static const struct {
		const char *in, *want;
	} cases[] = {
		{"{", "invalid JSON"},
		{"[1]", "must be a JSON object"},
		{"{\"op\":\"query\",\"text\":\"x\"}", "needs an \"id\""},
		{"{\"id\":[],\"op\":\"query\"}", "\"id\" must be a string"},
		{"{\"id\":\"1\"}", "needs \"op\""},
		{"{\"id\":\"1\",\"op\":\"delete\"}", "unknown op \"delete\""},
		{"{\"id\":\"1\",\"op\":\"tag\"}", "needs \"path\""},
		{"{\"id\":\"1\",\"op\":\"tag\",\"path\":5}", "\"path\" must be a string"},
		{"{\"id\":\"1\",\"op\":\"tag\",\"path\":\"../x\"}", "hidden"},
		{"{\"id\":\"1\",\"op\":\"tag\",\"path\":\"a\",\"related_apps\":\"x\"}",
		 "related_apps"},
		{"{\"id\":\"1\",\"op\":\"tag\",\"path\":\"a\",\"related_apps\":[\"A B\"]}",
		 "app name"},
		{"{\"id\":\"1\",\"op\":\"query\"}", "needs \"text\""},
		{"{\"id\":\"1\",\"op\":\"query\",\"text\":\"x\",\"limit\":0}", "positive integer"},
		{"{\"id\":\"1\",\"op\":\"query\",\"text\":\"x\",\"embedding\":[\"a\"]}", "number"},
		{"{\"id\":\"1\",\"id\":\"2\",\"op\":\"query\",\"text\":\"x\"}", "duplicate"},
		{"{\"id\":\"1\",\"op\":\"query\",\"text\":\"x\",\"a\":[[[[[[[[[[]]]]]]]]]]}",
		 "nest"},
	};
	SfsRequest rq;
	char err[512];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ASSERT_ERROR(parse(cases[i].in, &rq, err), EINVAL);
		if (!strstr(err, cases[i].want))
			TEST_FAIL("%s: \"%s\" lacks \"%s\"", cases[i].in, err, cases[i].want);
		ASSERT_NOT_NULL(rq.id);
		sfs_request_done(&rq);
	}
	/* The id is echoed even when the rest is wrong. */
	ASSERT_ERROR(parse("{\"id\":\"q7\",\"op\":\"query\"}", &rq, err), EINVAL);
	ASSERT_STREQ(json_string_value(rq.id), "q7");
	sfs_request_done(&rq);
}

TEST(query_match)
{
	char *m = sfs_query_match("Weekly plan: \"draft\" OR NEAR(x*) -y");

	ASSERT_STREQ(m,
		     "\"Weekly\" OR \"plan\" OR \"draft\" OR \"OR\" OR \"NEAR\" OR \"x\" OR \"y\"");
	free(m);
	m = sfs_query_match("  --- ");
	ASSERT_STREQ(m, "");
	free(m);
}

TEST(frame_encode)
{
	json_t *a = sfs_answer_error(json_string("x"), "bad");
	char *buf;
	size_t len;

	ASSERT_OK(sfs_frame_encode(a, 1024, &buf, &len));
	ASSERT_EQ(len, 4 + strlen("{\"id\":\"x\",\"ok\":false,\"error\":\"bad\"}"));
	ASSERT_EQ(buf[3], (char)(len - 4));
	ASSERT_TRUE(memcmp(buf + 4, "{\"id\":\"x\",\"ok\":false,\"error\":\"bad\"}", len - 4) == 0);
	free(buf);
	ASSERT_ERROR(sfs_frame_encode(a, 8, &buf, &len), E2BIG);
	json_decref(a);
}

TEST(apps_file)
{
	SfsApps apps;
	char err[256], who[SFS_IDENTITY_MAX];
	const char *ok = "{\"schema\":1,\"apps\":[{\"uid\":10000,\"name\":\"filesystem\"},"
			 "{\"uid\":10001,\"name\":\"notes\",\"read\":false}]}";

	ASSERT_OK(sfs_apps_parse(ok, strlen(ok), &apps, err, sizeof(err)));
	ASSERT_EQ(apps.n, 2);
	ASSERT_TRUE(sfs_apps_find(&apps, 10000)->read);
	ASSERT_FALSE(sfs_apps_find(&apps, 10001)->read);
	sfs_apps_identity(&apps, 10000, who);
	ASSERT_STREQ(who, "filesystem");
	sfs_apps_identity(&apps, 0, who);
	ASSERT_STREQ(who, "root");
	sfs_apps_identity(&apps, 4242, who);
	ASSERT_STREQ(who, "uid-4242");
	ASSERT_ERROR(sfs_apps_parse("{\"schema\":2,\"apps\":[]}", 22, &apps, err, sizeof(err)),
		     EINVAL);
	const char *dup =
		"{\"schema\":1,\"apps\":[{\"uid\":5,\"name\":\"a\"},{\"uid\":5,\"name\":\"b\"}]}";
	ASSERT_ERROR(sfs_apps_parse(dup, strlen(dup), &apps, err, sizeof(err)), EINVAL);
	const char *bad = "{\"schema\":1,\"apps\":[{\"uid\":5,\"name\":\"../x\"}]}";
	ASSERT_ERROR(sfs_apps_parse(bad, strlen(bad), &apps, err, sizeof(err)), EINVAL);
	const char *root = "{\"schema\":1,\"apps\":[{\"uid\":0,\"name\":\"x\"}]}";
	ASSERT_ERROR(sfs_apps_parse(root, strlen(root), &apps, err, sizeof(err)), EINVAL);
}

/* --- the index, on a temporary tree ------------------------------------------------------ */

typedef struct Fixture {
	char root[64], ctx[96], idx[96];
	int ctx_fd;
	SfsApps apps;
	SfsIndex *x;
} Fixture;

static void fixture_open(Fixture *f)
{
	char err[256];

	ASSERT_OK(sfs_index_open(f->idx, f->ctx_fd, &f->apps, &f->x, err, sizeof(err)));
}

static void fixture_init(Fixture *f)
{
	const char *apps = "{\"schema\":1,\"apps\":[{\"uid\":10000,\"name\":\"filesystem\"},"
			   "{\"uid\":10001,\"name\":\"notes\"},"
			   "{\"uid\":10002,\"name\":\"blind\",\"read\":false}]}";
	char err[256];

	snprintf(f->root, sizeof(f->root), "/tmp/test-sfs-XXXXXX");
	ASSERT_NOT_NULL(mkdtemp(f->root));
	snprintf(f->ctx, sizeof(f->ctx), "%s/context", f->root);
	snprintf(f->idx, sizeof(f->idx), "%s/index", f->root);
	ASSERT_OK(mkdir(f->ctx, 0755));
	f->ctx_fd = open(f->ctx, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ASSERT_TRUE(f->ctx_fd >= 0);
	ASSERT_OK(sfs_apps_parse(apps, strlen(apps), &f->apps, err, sizeof(err)));
	fixture_open(f);
}

static void fixture_done(Fixture *f)
{
	sfs_index_close(f->x);
	close(f->ctx_fd);
	(void)rm_rf(f->root);
}

static void put(Fixture *f, const char *rel, const char *text, uid_t uid, mode_t mode)
{
	char p[256];

	snprintf(p, sizeof(p), "%s/%s", f->ctx, rel);
	ASSERT_OK(write_file_atomic(p, text, strlen(text), mode));
	if (uid != (uid_t)-1)
		ASSERT_OK(sys(chown(p, uid, uid)));
}

static SfsCaller caller(uid_t uid, bool may_read)
{
	SfsCaller c = {.uid = uid, .gid = uid, .may_read = may_read};

	snprintf(c.name, sizeof(c.name), "uid-%u", (unsigned)uid);
	return c;
}

static json_t *query(Fixture *f, const SfsCaller *c, const char *text, unsigned limit)
{
	char *m = sfs_query_match(text);
	json_t *r = NULL;

	ASSERT_OK(sfs_index_sync(f->x, NULL));
	ASSERT_OK(sfs_index_query(f->x, c, m, limit, &r));
	free(m);
	return r;
}

static const char *field(json_t *results, size_t i, const char *key)
{
	return json_string_value(json_object_get(json_array_get(results, i), key));
}

static bool root_or_skip(void)
{
	if (geteuid() == 0)
		return true;
	printf("# skipped: needs root to own files as other uids\n");
	return false;
}

TEST(index_ranks_and_attributes)
{
	Fixture f;
	SfsCaller root = caller(0, true);
	json_t *r;

	if (!root_or_skip())
		return;
	fixture_init(&f);
	put(&f, "groceries.txt", "milk eggs bread", 10001, 0644);
	put(&f, "plan.md", "the launch plan: rockets, fuel, a launch window", 10000, 0644);
	put(&f, "other.md", "nothing about that here, just one launch", 4242, 0644);
	r = query(&f, &root, "launch plan", 10);
	ASSERT_EQ(json_array_size(r), 2);
	ASSERT_STREQ(field(r, 0, "path"), "plan.md");
	ASSERT_STREQ(field(r, 0, "created_by"), "filesystem");
	ASSERT_STREQ(field(r, 0, "ranking"), "keyword");
	ASSERT_STREQ(field(r, 1, "created_by"), "uid-4242");
	ASSERT_TRUE(json_real_value(json_object_get(json_array_get(r, 0), "score")) >
		    json_real_value(json_object_get(json_array_get(r, 1), "score")));
	json_decref(r);
	/* The empty query lists every file, newest first. */
	r = query(&f, &root, "", 2);
	ASSERT_EQ(json_array_size(r), 2);
	json_decref(r);
	fixture_done(&f);
}

TEST(index_tag_owner_only_and_durable)
{
	Fixture f;
	SfsCaller fs = caller(10000, true), notes = caller(10001, true), root = caller(0, true);
	char *related[] = {"notes", "activity-feed"};
	char err[512];
	json_t *e = NULL, *r;

	if (!root_or_skip())
		return;
	fixture_init(&f);
	snprintf(fs.name, sizeof(fs.name), "filesystem");
	put(&f, "a.txt", "alpha", 10000, 0644);
	ASSERT_ERROR(
		sfs_index_tag(f.x, &notes, "a.txt", "steal", NULL, 0, false, &e, err, sizeof(err)),
		EACCES);
	ASSERT_TRUE(strstr(err, "created by \"filesystem\"") != NULL);
	ASSERT_ERROR(
		sfs_index_tag(f.x, &fs, "missing.txt", "x", NULL, 0, false, &e, err, sizeof(err)),
		ENOENT);
	ASSERT_OK(sfs_index_tag(f.x, &fs, "a.txt", "quarterly zebra report", related, 2, true, &e,
				err, sizeof(err)));
	ASSERT_STREQ(json_string_value(json_object_get(e, "task")), "quarterly zebra report");
	ASSERT_EQ(json_array_size(json_object_get(e, "related_apps")), 2);
	json_decref(e);
	/* A tag without a task keeps the task. */
	ASSERT_OK(sfs_index_tag(f.x, &fs, "a.txt", NULL, NULL, 0, false, &e, err, sizeof(err)));
	ASSERT_STREQ(json_string_value(json_object_get(e, "task")), "quarterly zebra report");
	json_decref(e);
	/* Tags survive a restart: closed and opened again. */
	sfs_index_close(f.x);
	fixture_open(&f);
	r = query(&f, &root, "zebra", 5);
	ASSERT_EQ(json_array_size(r), 1);
	ASSERT_STREQ(field(r, 0, "path"), "a.txt");
	json_decref(r);
	r = query(&f, &root, "activity", 5);
	ASSERT_EQ(json_array_size(r), 1);
	json_decref(r);
	/* The file rewritten by its owner (a new inode, as a durable write makes) keeps them. */
	put(&f, "a.txt", "alpha beta", 10000, 0644);
	r = query(&f, &root, "zebra", 5);
	ASSERT_EQ(json_array_size(r), 1);
	json_decref(r);
	/* Replaced by another app: another file, whose creator it is, without the old tags. */
	put(&f, "a.txt", "alpha gamma", 10001, 0644);
	r = query(&f, &root, "zebra", 5);
	ASSERT_EQ(json_array_size(r), 0);
	json_decref(r);
	r = query(&f, &root, "gamma", 5);
	ASSERT_STREQ(field(r, 0, "created_by"), "notes");
	json_decref(r);
	/* Removed: forgotten. */
	char p[256];
	snprintf(p, sizeof(p), "%s/a.txt", f.ctx);
	ASSERT_OK(sys(unlink(p)));
	r = query(&f, &root, "alpha", 5);
	ASSERT_EQ(json_array_size(r), 0);
	json_decref(r);
	fixture_done(&f);
}

TEST(index_query_follows_dac)
{
	Fixture f;
	SfsCaller fs = caller(10000, true), notes = caller(10001, true),
		  blind = caller(10002, false);
	char dir[256];
	json_t *r;

	if (!root_or_skip())
		return;
	fixture_init(&f);
	put(&f, "open.txt", "shared secretword", 10000, 0644);
	put(&f, "mine.txt", "private secretword", 10000, 0600);
	snprintf(dir, sizeof(dir), "%s/locked", f.ctx);
	ASSERT_OK(sys(mkdir(dir, 0700)));
	ASSERT_OK(sys(chown(dir, 10000, 10000)));
	put(&f, "locked/in.txt", "inside secretword", 10000, 0644);
	r = query(&f, &fs, "secretword", 10);
	ASSERT_EQ(json_array_size(r), 3);
	json_decref(r);
	r = query(&f, &notes, "secretword", 10);
	ASSERT_EQ(json_array_size(r), 1);
	ASSERT_STREQ(field(r, 0, "path"), "open.txt");
	json_decref(r);
	/* A group the caller is in opens it again. */
	notes.groups[notes.n_groups++] = 10000;
	ASSERT_OK(sys(chmod(dir, 0750)));
	r = query(&f, &notes, "secretword", 10);
	ASSERT_EQ(json_array_size(r), 2);
	json_decref(r);
	r = query(&f, &blind, "secretword", 10);
	ASSERT_EQ(json_array_size(r), 0);
	json_decref(r);
	fixture_done(&f);
}

TEST(index_caps_and_hidden)
{
	Fixture f;
	SfsCaller root = caller(0, true);
	_cleanup_free_ char *big = malloc(SFS_FILE_TEXT_MAX + 100);
	json_t *r;

	fixture_init(&f);
	/* Past the per-file cap the text is not indexed. */
	memset(big, 'a', SFS_FILE_TEXT_MAX + 99);
	memcpy(big, "early ", 6);
	memcpy(big + SFS_FILE_TEXT_MAX + 10, " tailword ", 10);
	big[SFS_FILE_TEXT_MAX + 99] = 0;
	put(&f, "big.txt", big, (uid_t)-1, 0644);
	put(&f, ".hidden", "early", (uid_t)-1, 0644);
	char bin[256];
	snprintf(bin, sizeof(bin), "%s/bin.dat", f.ctx);
	ASSERT_OK(write_file_atomic(bin, "early\0x", 7, 0644));
	r = query(&f, &root, "early", 10);
	ASSERT_EQ(json_array_size(r), 1);
	ASSERT_STREQ(field(r, 0, "path"), "big.txt");
	json_decref(r);
	r = query(&f, &root, "tailword", 10);
	ASSERT_EQ(json_array_size(r), 0);
	json_decref(r);
	fixture_done(&f);
}

TEST(index_damaged_is_rebuilt)
{
	Fixture f;
	SfsCaller root = caller(0, true);
	char db[256];
	json_t *r;

	fixture_init(&f);
	put(&f, "x.txt", "kept words", (uid_t)-1, 0644);
	ASSERT_OK(sfs_index_sync(f.x, NULL));
	sfs_index_close(f.x);
	snprintf(db, sizeof(db), "%s/%s", f.idx, SFS_INDEX_DB);
	ASSERT_OK(write_file_atomic(db, "this is not a database, not at all, no", 38, 0600));
	fixture_open(&f);
	r = query(&f, &root, "kept", 10);
	ASSERT_EQ(json_array_size(r), 1);
	json_decref(r);
	fixture_done(&f);
}

int main(void)
{
	return tests_run();
}
