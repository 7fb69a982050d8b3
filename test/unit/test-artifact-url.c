/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "artifact-url.h"
#include "macros.h"
#include "pins.h"
#include "tests.h"

#define KERNEL_SHA "7c1eeb3d74fe3ae2160a0e6bdfcaafc3863d13a6cd9ef6cdedf839a2e24809c8"
#define INITRD_SHA "6e3e092b7d8b081429dedc5efc870f5a5c3253dcf428f8f406aec3cca6c133b4"
#define ROOTFS_SHA "af4f3fc0be1429cf324ffc77157c1c2359c641078675c1d6d0d82b746259ac69"

static void test_pins(PinSet *set)
{
	memset(set, 0, sizeof(*set));
	strcpy(set->sha256[ARTIFACT_KERNEL], KERNEL_SHA);
	strcpy(set->sha256[ARTIFACT_INITRD], INITRD_SHA);
	strcpy(set->sha256[ARTIFACT_ROOTFS], ROOTFS_SHA);
	set->size[ARTIFACT_KERNEL] = 1;
	set->size[ARTIFACT_INITRD] = 2;
	set->size[ARTIFACT_ROOTFS] = 3;
}

static void expect(const char *tmpl, ArtifactKind kind, const char *want)
{
	_cleanup_free_ char *url = NULL;
	char err[512] = "";
	PinSet set;

	test_pins(&set);
	if (artifact_url_expand(tmpl, &set, kind, &url, err, sizeof(err)) < 0)
		TEST_FAIL("expanding %s: %s", tmpl, err);
	ASSERT_STREQ(url, want);
	ASSERT_OK(artifact_url_check(tmpl, err, sizeof(err)));
}

static void expect_error(const char *tmpl, int error, const char *in_message)
{
	_cleanup_free_ char *url = NULL;
	char err[512] = "";
	PinSet set;

	test_pins(&set);
	ASSERT_EQ(artifact_url_expand(tmpl, &set, ARTIFACT_KERNEL, &url, err, sizeof(err)), -error);
	ASSERT_TRUE(url == NULL);
	if (!strstr(err, in_message))
		TEST_FAIL("\"%s\": message \"%s\" lacks \"%s\"", tmpl, err, in_message);
	if (error == EINVAL)
		ASSERT_ERROR(artifact_url_check(tmpl, err, sizeof(err)), EINVAL);
}

TEST(asset_per_kind)
{
	expect("https://m.example/{asset}", ARTIFACT_KERNEL,
	       "https://m.example/vmlinux-" KERNEL_SHA);
	expect("https://m.example/{asset}", ARTIFACT_INITRD,
	       "https://m.example/initrd-" INITRD_SHA ".cpio");
	expect("https://m.example/{asset}", ARTIFACT_ROOTFS,
	       "https://m.example/rootfs-" ROOTFS_SHA ".erofs");
}

TEST(release_tag_placeholders)
{
	expect("https://h/releases/download/vm-artifacts-{kernel8}-{rootfs8}/{asset}",
	       ARTIFACT_ROOTFS,
	       "https://h/releases/download/vm-artifacts-7c1eeb3d-af4f3fc0/rootfs-" ROOTFS_SHA
	       ".erofs");
	expect("http://h/{kernel}/{rootfs}", ARTIFACT_INITRD,
	       "http://h/" KERNEL_SHA "/" ROOTFS_SHA);
}

TEST(own_pin_kind_and_file)
{
	expect("http://h/{kind}/{sha256}", ARTIFACT_INITRD, "http://h/initrd/" INITRD_SHA);
	expect("http://h/{kind}/{file}", ARTIFACT_KERNEL, "http://h/kernel/vmlinux");
	expect("http://h/{file}", ARTIFACT_INITRD, "http://h/initrd-" INITRD_SHA ".cpio");
	expect("file:///mnt/usb/{kind}-{sha256}", ARTIFACT_ROOTFS,
	       "file:///mnt/usb/rootfs-" ROOTFS_SHA);
}

TEST(every_placeholder_at_once)
{
	expect("HTTPS://h/{asset}{kernel8}{rootfs8}{kernel}{rootfs}{kind}{sha256}{file}?x=1",
	       ARTIFACT_KERNEL,
	       "HTTPS://h/vmlinux-" KERNEL_SHA "7c1eeb3daf4f3fc0" KERNEL_SHA ROOTFS_SHA
	       "kernel" KERNEL_SHA "vmlinux?x=1");
}

TEST(no_placeholders)
{
	expect("https://h/fixed", ARTIFACT_KERNEL, "https://h/fixed");
}

TEST(errors)
{
	expect_error("https://h/{assets}", EINVAL, "unknown placeholder {assets}");
	expect_error("https://h/{ASSET}", EINVAL, "unknown placeholder");
	expect_error("https://h/{}", EINVAL, "unknown placeholder {}");
	expect_error("https://h/{asset", EINVAL, "unbalanced '{'");
	expect_error("https://h/asset}", EINVAL, "unbalanced '}'");
	expect_error("https://h/{{asset}}", EINVAL, "unbalanced '{'");
	expect_error("https://h/{as{set}", EINVAL, "unbalanced '{'");
	expect_error("", EINVAL, "empty");
	expect_error("/mnt/usb/{asset}", EINVAL, "http://, https:// or file://");
	expect_error("ftp://h/{asset}", EINVAL, "http://, https:// or file://");
	expect_error("https://h/{asset}\r\nX: y", EINVAL, "control character");
}

TEST(length_cap)
{
	_cleanup_free_ char *tmpl = NULL, *url = NULL;
	size_t prefix = strlen("https://h/");
	char err[512] = "";
	PinSet set;

	test_pins(&set);
	/* Exactly at the cap is fine; one byte more is not. */
	tmpl = malloc(ARTIFACT_URL_MAX + 2);
	ASSERT_NOT_NULL(tmpl);
	memcpy(tmpl, "https://h/", prefix);
	memset(tmpl + prefix, 'a', ARTIFACT_URL_MAX - prefix);
	tmpl[ARTIFACT_URL_MAX] = '\0';
	ASSERT_OK(artifact_url_expand(tmpl, &set, ARTIFACT_KERNEL, &url, err, sizeof(err)));
	ASSERT_EQ(strlen(url), ARTIFACT_URL_MAX);
	free(url);
	url = NULL;
	tmpl[ARTIFACT_URL_MAX] = 'a';
	tmpl[ARTIFACT_URL_MAX + 1] = '\0';
	ASSERT_ERROR(artifact_url_expand(tmpl, &set, ARTIFACT_KERNEL, &url, err, sizeof(err)),
		     E2BIG);
	/* A placeholder that pushes it over counts too. */
	memcpy(tmpl + ARTIFACT_URL_MAX - 20, "{sha256}", 9);
	ASSERT_ERROR(artifact_url_expand(tmpl, &set, ARTIFACT_KERNEL, &url, err, sizeof(err)),
		     E2BIG);
	ASSERT_NOT_NULL(strstr(err, "longer than"));
	ASSERT_TRUE(url == NULL);
}

int main(void)
{
	return tests_run();
}
