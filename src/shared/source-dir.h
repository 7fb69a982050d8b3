/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Files the CLI uses from a Berth checkout: the app templates, the SDKs and their bundler
 * and node_modules. $BERTH_SOURCE_DIR names the checkout; a CLI built from one knows
 * where it was built.
 */

/* @rel under the checkout, malloc()ed in *@ret; -ENOENT when it does not exist. */
int berth_source_path(const char *rel, char **ret);
