// Tests of FaultInjectionEnv (fs/fault_env.h): its RandomRWFile (writes at
// offsets, counted, crashed, torn and reverted at a power loss), and
// partial power loss (each sector old or new). The fixture is in
// fault_env_fixture.h.
#include <errno.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fs/fault_env.h"
#include "gtest/gtest.h"
#include "tests/fault_env_fixture.h"
#include "tests/test_util.h"

namespace wizq::fault_env_test {
namespace {

// --- RandomRWFile ------------------------------------------------------------

TEST_F(FaultEnvTest, CountsRandomRWFileOperations) {
  OpenRW("audit");                        // open + SyncDir: 2
  ASSERT_TRUE(rw_->Write(0, "ab").ok());  // 3
  ASSERT_TRUE(rw_->Sync().ok());          // 4
  ASSERT_TRUE(rw_->Truncate(1).ok());     // 5
  std::string data;
  ASSERT_TRUE(rw_->Read(0, 10, &data).ok());  // not counted
  EXPECT_EQ("a", data);
  uint64_t size = 0;
  ASSERT_TRUE(rw_->Size(&size).ok());  // not counted
  EXPECT_EQ(1u, size);
  ASSERT_TRUE(rw_->Close().ok());  // not counted
  OpenRW("audit");                 // exists: 6
  EXPECT_EQ(6, env_.op_count());
}

TEST_F(FaultEnvTest, CrashBetweenRandomRWCreateAndDirSyncLosesNewFile) {
  env_.CrashAtOp(2);  // The SyncDir inside NewRandomRWFile.
  EXPECT_FALSE(env_.NewRandomRWFile(Path("audit"), &rw_).ok());
  EXPECT_TRUE(env_.crashed());
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_FALSE(env_.FileExists(Path("audit")));

  OpenRW("audit");
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_TRUE(env_.FileExists(Path("audit")));
}

TEST_F(FaultEnvTest, CrashAtRandomWriteSkipsItAndFailsEverythingAfter) {
  SyncedRW("audit", "0123456789");
  env_.CrashAtOp(env_.op_count() + 1);
  Status s = rw_->Write(2, "ABCD");
  EXPECT_TRUE(s.IsIOError());
  EXPECT_TRUE(Contains(s, "simulated crash")) << s.ToString();
  EXPECT_TRUE(Contains(s, "pwrite")) << s.ToString();
  EXPECT_TRUE(env_.crashed());
  EXPECT_EQ("0123456789", ReadAll(Path("audit")));  // Not performed.
  const int64_t ops = env_.op_count();

  EXPECT_TRUE(Contains(rw_->Write(0, "x"), "simulated crash"));
  EXPECT_FALSE(rw_->Sync().ok());
  EXPECT_FALSE(rw_->Truncate(0).ok());
  std::string data;
  EXPECT_TRUE(Contains(rw_->Read(0, 4, &data), "simulated crash"));
  uint64_t size;
  EXPECT_TRUE(Contains(rw_->Size(&size), "simulated crash"));
  std::unique_ptr<RandomRWFile> other;
  EXPECT_FALSE(env_.NewRandomRWFile(Path("other"), &other).ok());
  EXPECT_FALSE(env_.FileExists(Path("other")));
  EXPECT_FALSE(rw_->Close().ok());
  EXPECT_EQ(ops, env_.op_count());
  EXPECT_EQ("0123456789", ReadAll(Path("audit")));
}

TEST_F(FaultEnvTest, TornRandomWriteOnCrashWritesStrictPrefixThenReverts) {
  const std::string synced = "................";
  const std::string data = "0123456789";
  bool saw_long = false;
  for (int i = 0; i < 20; i++) {
    SCOPED_TRACE("iteration " + std::to_string(i));
    ScratchDir dir;
    FaultInjectionEnv env(Env::Posix());
    env.SetTornWrites(true);
    std::unique_ptr<RandomRWFile> rw;
    ASSERT_TRUE(env.NewRandomRWFile(dir.Join("audit"), &rw).ok());
    ASSERT_TRUE(rw->Write(0, synced).ok());
    ASSERT_TRUE(rw->Sync().ok());
    // Vary the rng's state with i torn writes that are then undone.
    for (int j = 0; j < i; j++) {
      env.FailOp(FaultInjectionEnv::kWrite, 1, EIO, false);
      EXPECT_FALSE(rw->Write(0, data).ok());
    }
    ASSERT_TRUE(env.DropUnsyncedData().ok());
    ASSERT_EQ(synced, ReadAll(dir.Join("audit")));

    env.CrashAtOp(1);
    EXPECT_FALSE(rw->Write(3, data).ok());
    const std::string got = ReadAll(dir.Join("audit"));
    ASSERT_EQ(synced.size(), got.size());
    size_t torn = 0;
    while (torn < data.size() && got[3 + torn] == data[torn]) torn++;
    EXPECT_GT(torn, 0u);
    EXPECT_LT(torn, data.size());
    if (torn > 1) saw_long = true;
    std::string want = synced;
    want.replace(3, torn, data.substr(0, torn));
    EXPECT_EQ(want, got);
    // The torn bytes overwrote synced ones: a power loss puts those back.
    ASSERT_TRUE(env.DropUnsyncedData().ok());
    EXPECT_EQ(synced, ReadAll(dir.Join("audit")));
  }
  EXPECT_TRUE(saw_long);
}

TEST_F(FaultEnvTest, NoTornRandomWriteUnlessEnabled) {
  SyncedRW("audit", "0123456789");
  env_.CrashAtOp(env_.op_count() + 1);
  EXPECT_FALSE(rw_->Write(0, "abcdefgh").ok());
  EXPECT_EQ("0123456789", ReadAll(Path("audit")));
}

TEST_F(FaultEnvTest, PowerLossRevertsUnsyncedOverwritesAndGrowth) {
  SyncedRW("audit", "synced|content\n\n\n\n");
  ASSERT_TRUE(rw_->Write(7, "CONTENT").ok());
  ASSERT_TRUE(rw_->Write(14, "rec1").ok());    // Over the padding.
  ASSERT_TRUE(rw_->Write(15, "REC2").ok());    // Overlaps the one before.
  ASSERT_TRUE(rw_->Write(19, "+grown").ok());  // Past the synced size.
  EXPECT_EQ("synced|CONTENTrREC2+grown", ReadAll(Path("audit")));
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_EQ("synced|content\n\n\n\n", ReadAll(Path("audit")));

  // The file stays usable, and tracked across close and reopen.
  ASSERT_TRUE(rw_->Write(0, "S").ok());
  ASSERT_TRUE(rw_->Close().ok());
  OpenRW("audit");
  ASSERT_TRUE(rw_->Write(1, "Y").ok());
  EXPECT_EQ("SYnced|content\n\n\n\n", ReadAll(Path("audit")));
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_EQ("synced|content\n\n\n\n", ReadAll(Path("audit")));
}

TEST_F(FaultEnvTest, PreexistingContentOfRandomRWFileCountsAsSynced) {
  WriteAll(Path("audit"), "before\n\n\n\n");
  OpenRW("audit");
  ASSERT_TRUE(rw_->Write(6, "AFTER").ok());
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_EQ("before\n\n\n\n", ReadAll(Path("audit")));
}

TEST_F(FaultEnvTest, SyncedOverwritesSurvivePowerLoss) {
  SyncedRW("audit", "aaaaaaaaaa");
  ASSERT_TRUE(rw_->Write(2, "bbb").ok());
  ASSERT_TRUE(rw_->Write(10, "cc").ok());
  ASSERT_TRUE(rw_->Sync().ok());
  ASSERT_TRUE(rw_->Write(3, "DD").ok());  // Unsynced again.
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_EQ("aabbbaaaaacc", ReadAll(Path("audit")));
}

TEST_F(FaultEnvTest, FailedSyncOfRandomRWFileLeavesWritesUnsynced) {
  SyncedRW("audit", "aaaa");
  ASSERT_TRUE(rw_->Write(1, "bb").ok());
  env_.FailOp(FaultInjectionEnv::kSync, 1, EIO, false);
  Status s = rw_->Sync();
  EXPECT_TRUE(s.IsIOError());
  EXPECT_TRUE(Contains(s, Path("audit"))) << s.ToString();
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_EQ("aaaa", ReadAll(Path("audit")));
}

TEST_F(FaultEnvTest, FailedRandomWriteHasNoEffect) {
  SyncedRW("audit", "0123456789");
  env_.FailOp(FaultInjectionEnv::kWrite, 1, ENOSPC, false);
  Status s = rw_->Write(2, "abcdef");
  EXPECT_TRUE(s.IsIOError());
  EXPECT_TRUE(Contains(s, "No space left")) << s.ToString();
  EXPECT_TRUE(Contains(s, Path("audit"))) << s.ToString();
  EXPECT_FALSE(env_.crashed());
  EXPECT_EQ("0123456789", ReadAll(Path("audit")));
  uint64_t size = 0;
  ASSERT_TRUE(rw_->Size(&size).ok());
  EXPECT_EQ(10u, size);
  ASSERT_TRUE(rw_->Write(8, "xyz").ok());  // Once only.
  EXPECT_EQ("01234567xyz", ReadAll(Path("audit")));
}

TEST_F(FaultEnvTest, FailedRandomWriteLeavesTornPrefixThenReverts) {
  SyncedRW("audit", "0123456789");
  env_.SetTornWrites(true);
  env_.FailOp(FaultInjectionEnv::kWrite, 1, ENOSPC, false);
  EXPECT_FALSE(rw_->Write(6, "abcdefgh").ok());  // Over the end and past.
  const std::string got = ReadAll(Path("audit"));
  ASSERT_GE(got.size(), 10u);
  ASSERT_LT(got.size(), 14u);
  const std::string full = "012345abcdefgh";
  size_t torn = 0;
  while (6 + torn < got.size() && got[6 + torn] == full[6 + torn]) torn++;
  ASSERT_GT(torn, 0u);
  ASSERT_LT(torn, 8u);
  EXPECT_EQ(full.substr(0, 6 + torn) +
                std::string("6789").substr(std::min<size_t>(torn, 4)),
            got);
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_EQ("0123456789", ReadAll(Path("audit")));
}

TEST_F(FaultEnvTest, RandomTruncateThenPowerLoss) {
  SyncedRW("audit", "0123456789");
  ASSERT_TRUE(rw_->Write(2, "AB").ok());
  ASSERT_TRUE(rw_->Write(7, "CD").ok());
  ASSERT_TRUE(rw_->Truncate(5).ok());
  uint64_t size = 0;
  ASSERT_TRUE(rw_->Size(&size).ok());
  EXPECT_EQ(5u, size);
  ASSERT_TRUE(rw_->Write(5, "xyz").ok());
  EXPECT_EQ("01AB4xyz", ReadAll(Path("audit")));
  // The unsynced truncate is not durable: only what was synced below the
  // cut is kept, with its synced content.
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_EQ("01234", ReadAll(Path("audit")));

  // A synced truncate is.
  ASSERT_TRUE(rw_->Truncate(3).ok());
  ASSERT_TRUE(rw_->Sync().ok());
  ASSERT_TRUE(rw_->Write(0, "Z").ok());
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_EQ("012", ReadAll(Path("audit")));
}

TEST_F(FaultEnvTest, RemovedFileComesBackWithSyncedContentNotOverwrites) {
  SyncedRW("audit", "synced");
  ASSERT_TRUE(rw_->Write(0, "XX").ok());
  ASSERT_TRUE(rw_->Write(6, "+more").ok());
  ASSERT_TRUE(rw_->Close().ok());
  ASSERT_TRUE(env_.RemoveFile(Path("audit")).ok());
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_EQ("synced", ReadAll(Path("audit")));
}

TEST_F(FaultEnvTest, TruncateFileMakesOverwritesDurable) {
  SyncedRW("audit", "0123456789");
  ASSERT_TRUE(rw_->Write(1, "ab").ok());
  ASSERT_TRUE(env_.TruncateFile(Path("audit"), 6).ok());  // Syncs.
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_EQ("0ab345", ReadAll(Path("audit")));
}

// --- partial power loss ------------------------------------------------------

constexpr size_t kSector = 512;

// What a 512-byte sector of `got` at `sector` holds, among `choices` (index),
// or -1 if none.
int SectorIs(const std::string& got, size_t sector,
             const std::vector<std::string>& choices) {
  const size_t pos = sector * kSector;
  for (size_t i = 0; i < choices.size(); i++) {
    if (got.compare(pos, kSector, choices[i]) == 0) return static_cast<int>(i);
  }
  return -1;
}

// Four synced sectors are overwritten (sector 0 by two writes, one half
// each) and four sectors appended, then power is lost: every sector is one
// of the versions it had, the appended part a prefix of random length whose
// sectors hold the new bytes or zeros, and over the iterations every
// outcome occurs.
TEST_F(FaultEnvTest, PartialPowerLossKeepsEachSectorOldOrNew) {
  env_.SetPartialPowerLoss(true);
  env_.ResetState();  // Kept across it.
  const std::string old_bytes(4 * kSector, 'o');
  const std::string half_n(kSector / 2, 'n'), half_m(kSector / 2, 'm');
  const std::string half_o(kSector / 2, 'o');
  const std::string sector_o(kSector, 'o'), sector_n(kSector, 'n');
  const std::string sector_a(kSector, 'a'), zeros(kSector, '\0');
  OpenRW("audit");
  std::map<std::string, int> seen;
  for (int iter = 0; iter < 200; iter++) {
    SCOPED_TRACE("iteration " + std::to_string(iter));
    ASSERT_TRUE(rw_->Truncate(0).ok());
    ASSERT_TRUE(rw_->Write(0, old_bytes).ok());
    ASSERT_TRUE(rw_->Sync().ok());
    // Sector 0 gets two records one after the other, like the audit log.
    ASSERT_TRUE(rw_->Write(0, half_n).ok());
    ASSERT_TRUE(rw_->Write(kSector / 2, half_m).ok());
    ASSERT_TRUE(rw_->Write(kSector, std::string(3 * kSector, 'n')).ok());
    ASSERT_TRUE(rw_->Write(4 * kSector, std::string(4 * kSector, 'a')).ok());
    ASSERT_TRUE(env_.DropUnsyncedData().ok());

    const std::string got = ReadAll(Path("audit"));
    ASSERT_GE(got.size(), 4 * kSector);
    ASSERT_LE(got.size(), 8 * kSector);
    // Sector 0: synced, after the first write, or after the second; never
    // the second record without the first.
    const int s0 =
        SectorIs(got, 0, {half_o + half_o, half_n + half_o, half_n + half_m});
    ASSERT_NE(-1, s0) << got.substr(0, kSector);
    seen["sector0=" + std::to_string(s0)]++;
    for (size_t sector = 1; sector < 4; sector++) {
      const int v = SectorIs(got, sector, {sector_o, sector_n});
      ASSERT_NE(-1, v) << "sector " << sector;
      seen[v == 0 ? "old" : "new"]++;
    }
    for (size_t pos = 4 * kSector; pos < got.size(); pos += kSector) {
      const size_t n = std::min(kSector, got.size() - pos);
      const std::string piece = got.substr(pos, n);
      if (piece == sector_a.substr(0, n)) {
        seen["appended"]++;
      } else {
        ASSERT_EQ(zeros.substr(0, n), piece) << "at " << pos;
        seen["zeros"]++;
      }
    }
    seen[got.size() == 8 * kSector   ? "all kept"
         : got.size() == 4 * kSector ? "none kept"
         : got.size() % kSector != 0 ? "cut in a sector"
                                     : "cut at a sector"]++;

    // What survived is on disk now: a second power loss changes nothing.
    ASSERT_TRUE(env_.DropUnsyncedData().ok());
    ASSERT_EQ(got, ReadAll(Path("audit")));
  }
  for (const char* outcome : {"sector0=0", "sector0=1", "sector0=2", "old",
                              "new", "appended", "zeros", "cut in a sector"}) {
    EXPECT_GT(seen[outcome], 0) << outcome;
  }
}

// Synced bytes cut by an unsynced truncate count as lost (like the cut of
// a WritableFile): when the file grows again, a partial power loss leaves
// there the new bytes or zeros, never the old synced bytes.
TEST_F(FaultEnvTest, PartialPowerLossAfterTruncateNeverBringsBackCutBytes) {
  env_.SetPartialPowerLoss(true);
  OpenRW("audit");
  std::map<std::string, int> seen;
  for (int iter = 0; iter < 50; iter++) {
    SCOPED_TRACE("iteration " + std::to_string(iter));
    ASSERT_TRUE(rw_->Truncate(0).ok());
    ASSERT_TRUE(rw_->Write(0, std::string(2 * kSector, 'o')).ok());
    ASSERT_TRUE(rw_->Sync().ok());
    ASSERT_TRUE(rw_->Write(kSector, std::string(kSector, 'n')).ok());
    ASSERT_TRUE(rw_->Truncate(kSector).ok());
    ASSERT_TRUE(rw_->Write(kSector, std::string(kSector, 'a')).ok());
    ASSERT_TRUE(env_.DropUnsyncedData().ok());
    const std::string got = ReadAll(Path("audit"));
    ASSERT_GE(got.size(), kSector);
    ASSERT_EQ(std::string(kSector, 'o'), got.substr(0, kSector));
    const std::string rest = got.substr(kSector);
    if (rest == std::string(rest.size(), 'a')) {
      seen["appended"]++;
    } else {
      ASSERT_EQ(std::string(rest.size(), '\0'), rest);
      seen["zeros"]++;
    }
  }
  EXPECT_GT(seen["appended"], 0);
  EXPECT_GT(seen["zeros"], 0);
}

TEST_F(FaultEnvTest, PartialPowerLossOfAppendableFile) {
  env_.SetPartialPowerLoss(true);
  OpenLog("log");
  ASSERT_TRUE(file_->Append("synced|").ok());
  ASSERT_TRUE(file_->Sync().ok());
  const std::string tail(3 * kSector, 'a');
  std::map<std::string, int> seen;
  for (int iter = 0; iter < 100; iter++) {
    SCOPED_TRACE("iteration " + std::to_string(iter));
    ASSERT_TRUE(env_.TruncateFile(Path("log"), 7).ok());  // Durable.
    ASSERT_TRUE(file_->Append(tail).ok());
    ASSERT_TRUE(env_.DropUnsyncedData().ok());
    const std::string got = ReadAll(Path("log"));
    ASSERT_GE(got.size(), 7u);
    ASSERT_LE(got.size(), 7 + tail.size());
    ASSERT_EQ("synced|", got.substr(0, 7));
    // Sectors are aligned to the file, not to the append.
    for (size_t pos = 7; pos < got.size();) {
      const size_t end = std::min(got.size(), (pos / kSector + 1) * kSector);
      const std::string piece = got.substr(pos, end - pos);
      if (piece == std::string(end - pos, 'a')) {
        seen["appended"]++;
      } else {
        ASSERT_EQ(std::string(end - pos, '\0'), piece) << "at " << pos;
        seen["zeros"]++;
      }
      pos = end;
    }
    seen[got.size() == 7 ? "none kept" : "some kept"]++;
  }
  for (const char* outcome : {"appended", "zeros", "some kept"}) {
    EXPECT_GT(seen[outcome], 0) << outcome;
  }
}

TEST_F(FaultEnvTest, PartialPowerLossOffRevertsEverything) {
  env_.SetPartialPowerLoss(true);
  env_.SetPartialPowerLoss(false);
  for (int iter = 0; iter < 20; iter++) {
    SyncedRW("audit", std::string(2 * kSector, 'o'));
    ASSERT_TRUE(rw_->Write(0, std::string(4 * kSector, 'n')).ok());
    ASSERT_TRUE(env_.DropUnsyncedData().ok());
    ASSERT_EQ(std::string(2 * kSector, 'o'), ReadAll(Path("audit")));
  }
}

}  // namespace
}  // namespace wizq::fault_env_test
