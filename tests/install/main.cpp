// The smallest real use of an installed holdfast: include the umbrella header and build.
#include <holdfast/holdfast.hpp>

int main() {
  return 0;
}
