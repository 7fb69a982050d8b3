/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * tsc_measure_khz() - the host TSC rate in kHz.
 *
 * Under TCG the guest's TSC ticks at the host's rate, and microvm has neither HPET nor
 * an ACPI PM timer, so the guest's own calibration against the PIT hangs at random.
 * Passing tsc_early_khz=<this> skips it. Takes about 150 ms.
 * Returns a positive rate, or -errno.
 */
long tsc_measure_khz(void);
