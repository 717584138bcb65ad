//! turbonet-routing
