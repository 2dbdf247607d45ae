#!/usr/bin/env python3
"""The hostile numbers a person types into the console and the CLI (HostileCorpusTests).

  hostile_numbers.py     prints {"rates": [...], "durations": [...], "dates": [...], "counts": [...],
                         "ids": [...], "jobs": [...], "drain_ms": [...], "valid_rates": [...],
                         "valid_durations": [...]} as JSON

Each list holds texts that must be refused (a 400 in the console, exit 2 from the CLI) without a
crash: what crashed the gateway and the CLI in the hostile-input study (a rate converted past
Int.max, a rate that underflowed to 0, a due time past Int64, a sum of durations past Int64),
the non-numbers, signs, exponents, the boundaries just past each bound, and numbers of 400
digits; `dates` and `ids` may be read or refused, but never crash. The valid ones are the
bounds themselves, which must be accepted.
"""
import json

DIGITS_400 = "9" * 400

RATES = ["1e300", "1e19", "9.3e18/s", "5e-324/h", "1e-300", "1e-13", "inf", "-inf", "nan", "NaN", "Infinity",
         "-1", "-0", "0", "0/s", "0.0/h", "+5", "0x10", "0x1p3", "1e3", "5.", ".5", "1_000", "1,000", " 5", "5 ",
         "5\t", "5/d", "5/", "/s", "5/s/s", "10001/s", "600001/m", "36000001/h", "0.9/h", "0.0002/s",
         "9223372036854775807", "9223372036854775808/s", "18446744073709551616/m", "1e308/h", "4.9e-324",
         "2.2250738585072014e-308/s", "\u0661\u0660/s", "\uff15/s", DIGITS_400, "0." + "0" * 398 + "1",
         DIGITS_400 + "/h", "1" + "0" * 20 + "/s"]
DURATIONS = ["999999999w" * 16, "36526d", "36525d1s", "5218w", DIGITS_400 + "s", "1e300s", "nan", "inf", "-3d", "0s",
             "9223372036854775807s", "9223372036854775807ms", "1.5h", "999999999w1s", "\u0661s"]
DATES = ["9999-12-31T23:59:59.999999999Z", "0000-01-01", "0000-01-01T00:00:00+23:59", "9999-12-31T23:59:59-23:59",
         "2026-02-30", "2026-11-29T24:00", "99999-01-01", "2026-11-29T10:11:12." + "9" * 400 + "Z", "-0001-01-01"]
COUNTS = ["1e300", DIGITS_400, "-1", "0", "nan", "10001", "9223372036854775808", "0x10", "1e3", " 5"]
IDS = ["18446744073709551615-18446744073709551615", "18446744073709551616-0", "99999999999999999999-0", "0-0",
       "-1-0", "1e300-0", "inf-0", DIGITS_400 + "-0", "0-" + DIGITS_400, "9000000000000001-0"]
JOBS = ["18446744073709551616", "9223372036854775807", "-1", "0", DIGITS_400, "1e300"]
DRAIN_MS = ["9223372036854775807", "3600001", "-1", "1e300", DIGITS_400, "nan"]

if __name__ == "__main__":
    print(json.dumps({"rates": RATES, "durations": DURATIONS, "dates": DATES, "counts": COUNTS, "ids": IDS,
                      "jobs": JOBS, "drain_ms": DRAIN_MS, "valid_rates": ["1/h", "10000/s", "600000/m", "0.5/m"],
                      "valid_durations": ["36525d", "5217w", "1s"]}))
