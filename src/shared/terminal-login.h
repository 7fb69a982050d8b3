/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * The login of the terminal's web view (docs/terminal.md): "berth:" and a secret of 24
 * random bytes in base64url without padding, made by the CLI for each berth dev session
 * and handed to the terminal app alone on the secrets disk, as BERTH_TERMINAL_CREDENTIAL.
 * SECURITY: it never goes on a command line, into vm.json or into a log.
 */

#include <stddef.h>

#define TERMINAL_LOGIN_USER "berth"
#define TERMINAL_LOGIN_ENV "BERTH_TERMINAL_CREDENTIAL"
#define TERMINAL_LOGIN_SECRET_BYTES 24
#define TERMINAL_LOGIN_SECRET_LEN 32 /* 24 bytes in base64url */
#define TERMINAL_LOGIN_LEN (sizeof(TERMINAL_LOGIN_USER ":") - 1 + TERMINAL_LOGIN_SECRET_LEN)

/*
 * terminal_login_new() - a new login into @ret (TERMINAL_LOGIN_LEN characters and a NUL),
 * its secret from getrandom(), which waits for the kernel's entropy rather than make a
 * weaker one. Returns 0 or -errno.
 */
int terminal_login_new(char ret[static TERMINAL_LOGIN_LEN + 1]);

/* The secret of @login: what follows "berth:". */
const char *terminal_login_secret(const char *login);

/*
 * The browser layer's VNC password (docs/browser.md): 6 random bytes in base64url, 8
 * characters, made per berth dev session and handed to the browser app's VM alone on the
 * secrets disk as BERTH_VNC_PASSWORD, where berth-init writes x11vnc's -rfbauth file. VNC
 * authentication uses 8 bytes at most. The same rules as the login: never an argument,
 * vm.json or a log.
 */
#define VNC_PASSWORD_ENV "BERTH_VNC_PASSWORD"
#define VNC_PASSWORD_BYTES 6
#define VNC_PASSWORD_LEN 8
int vnc_password_new(char ret[static VNC_PASSWORD_LEN + 1]);
