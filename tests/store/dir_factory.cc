// The directory store in the contract suite: a fresh temporary install
// directory per case.
#include <memory>

#include "fs/env.h"
#include "tests/store/store_contract.h"
#include "tests/test_util.h"

namespace wizq::store_test {
namespace {

class DirFactory : public StoreFactory {
 public:
  std::string Name() const override { return "dir"; }
  StoreOptions NewPlace() override {
    dir_ = std::make_unique<test::ScratchDir>();
    StoreOptions o;
    o.install_dir = dir_->path();
    o.env = Env::Posix();
    return o;
  }
  void Cleanup() override { dir_.reset(); }

 private:
  std::unique_ptr<test::ScratchDir> dir_;
};

const Register kDir("dir", [] { return std::make_unique<DirFactory>(); });

}  // namespace
}  // namespace wizq::store_test
