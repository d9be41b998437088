// UsableCpus (src/common/usable_cpus.h) counts the CPUs the caller is bound to, not the machine's.
#include <gtest/gtest.h>
#include <sched.h>

#include "common/usable_cpus.h"

namespace cdt {
namespace {

TEST(UsableCpus, FollowsTheAffinityMask) {
  cpu_set_t all;
  CPU_ZERO(&all);
  ASSERT_EQ(::sched_getaffinity(0, sizeof all, &all), 0);
  EXPECT_EQ(UsableCpus(), CPU_COUNT(&all));
  int first = 0;
  while (!CPU_ISSET(first, &all)) ++first;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  ASSERT_EQ(::sched_setaffinity(0, sizeof one, &one), 0);  // this thread only
  EXPECT_EQ(UsableCpus(), 1);
  ASSERT_EQ(::sched_setaffinity(0, sizeof all, &all), 0);
  EXPECT_EQ(UsableCpus(), CPU_COUNT(&all));
}

}  // namespace
}  // namespace cdt
