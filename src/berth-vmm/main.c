/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>
#include "pins.h"
int main(void)
{
	printf("%s\n", pin_get(ARTIFACT_KERNEL)->sha256);
	return 0;
}
