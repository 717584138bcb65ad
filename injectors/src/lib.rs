//! turbonet-injectors
