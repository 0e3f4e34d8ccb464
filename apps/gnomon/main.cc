#include "apps/gnomon/commands.h"

int main(int argc, char** argv) { return gnomon::app::RunMain(argc, argv); }
